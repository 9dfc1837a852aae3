"""contact-surrogate: learned contact for MuJoCo.

Layers, lower first; each imports only from its own layer or below (tests/test_layers.py):
  core      - errors, config, paths, atomic, metrics, estimate, suites, splits
  capture   - the on-disk capture format (LeRobotDataset v3 layout + meta/contact.json)
  objects   - object assets: procedural families, mesh files, URDF masses, splits
  importers - converters from public recordings (ContactNets tosses, pose files)
  scenes    - MuJoCo scenes built with MjSpec, naming the contact pairs a surrogate owns
  model     - the contact surrogate: graph, networks, passive law, checkpoints
  sim       - the hybrid stepper, the differentiable twin, toss rollouts
  learn     - rollout training through the twin
  envs      - Gymnasium environments
  rig       - the capture rig (reference physics and recorder)
  policies  - scripted grasp policies
  bench     - suites, ledger, report, videos and studies (gap, soak, speed)
  training, quickstart, inspect, cli, hybrid_mjcf - entry points

``surrogate.hybrid(model, owned=[...])``: the hybrid stepper on any MJCF (``hybrid_mjcf``).
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    """``surrogate.hybrid``, loaded on first use (PEP 562): ``import surrogate`` stays light (no torch, no MuJoCo
    model code), and this package's core layer imports nothing above it (tests/test_layers.py)."""
    if name == "hybrid":
        import importlib

        return importlib.import_module("surrogate.hybrid_mjcf").hybrid
    raise AttributeError(f"module 'surrogate' has no attribute {name!r}")


def _third_party_output() -> None:
    """Known third-party noise, filtered at the source for this process and the worker processes the commands
    start (they import this package); ``SURROGATE_VERBOSE=1`` (``--verbose``) keeps everything. The trimesh filter
    reads it at each message: ``surrogate --verbose`` sets it after this import, and trimesh's messages then show.

    - trimesh logs "only got N/M samples!" whenever its even surface sampling keeps fewer points than asked:
      the rig's pad and surface samplers ask generously and use what they get, so every rig run printed it
      dozens of times for nothing.
    - MuJoCo writes its warnings ("simulation is unstable", "Inertia matrix is too close to singular") to the
      console and to MUJOCO_LOG.TXT in the current folder; the identification explores parameter sets that blow
      up by design. Where a command names a log file (``SURROGATE_MUJOCO_LOG``, set to its run folder's
      ``mujoco.log``) they go there instead, console off.
    """
    import logging
    import os

    if os.environ.get("SURROGATE_VERBOSE"):
        return
    logging.getLogger("trimesh.sample").addFilter(  # the logger it logs on
        lambda r: bool(os.environ.get("SURROGATE_VERBOSE")) or "samples!" not in str(r.msg))
    log = os.environ.get("SURROGATE_MUJOCO_LOG")
    if log:
        import mujoco

        c = mujoco.MjLogConfig.get()
        c.logfile, c.logto_console, c.logto_file = log, False, True
        c.set()


_third_party_output()
