"""Baselines the product is measured against, outside its model package.

- ``gns`` (with ``gns_geometry``, ``gns_rollout``, ``gns_data``, ``gns_lightning``, ``gns_fit``): the end-to-end
  learned peer in the GNS style, which learns the whole rigid-body step of a free object with no MuJoCo. It is
  trained with ``surrogate train --config gns_cube`` (``model.kind: gns``) and scored as a row of ``cube-real``;
  on the cube tosses it is a negative result against the hybrid (``docs/benchmarks.md``). Importing
  ``surrogate.baselines.gns`` registers its checkpoint class with ``surrogate.model.checkpoint``.
"""
