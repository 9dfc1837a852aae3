"""Package data, not code: the project's YAML configs, installed as ``surrogate.configs`` (see pyproject.toml;
found with ``surrogate.paths.config_dir``)."""
