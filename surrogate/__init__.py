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
  training, quickstart, inspect, cli - entry points
"""

__version__ = "0.1.0"
