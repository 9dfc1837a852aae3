"""contact-surrogate: learned contact for MuJoCo.

Subpackages, one concern each:
  capture   - the on-disk capture format (LeRobotDataset v3 layout + meta/contact.json)
  importers - converters from public recordings (ContactNets tosses, pose files)
  objects   - object assets: procedural families, mesh files, URDF masses, splits
  scenes    - MuJoCo scenes built with MjSpec, naming the contact pairs a surrogate owns
"""

__version__ = "0.1.0"
