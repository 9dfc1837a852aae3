"""Package data, not code: the released checkpoints (safetensors + JSON card), installed as
``surrogate.checkpoints`` (see pyproject.toml; found with ``surrogate.paths.release_checkpoint``)."""
