"""What ``stepper.step`` is given, checked against the stepper's scene: one ``MjData`` or a batch of them, of a
model of that scene (the counts, and the object's shape: its size is the law's unit of length)."""

from __future__ import annotations

import mujoco
import numpy as np

from ..errors import ConfigError


def as_datas(data) -> list[mujoco.MjData]:
    """[B] the ``MjData`` of ``data``: one, or a sequence of them."""
    if isinstance(data, mujoco.MjData):
        return [data]
    datas = list(data)
    if not all(isinstance(d, mujoco.MjData) for d in datas):
        raise TypeError("data must be an MjData or a sequence of MjData")
    return datas


def check_model(m: mujoco.MjModel, datas, builder, own: mujoco.MjModel) -> None:
    """``m`` and ``datas`` are of the stepper's scene (``own``: its model): the same counts, and the same object
    shape, whose size is the law's length unit (the counts alone let another object of as many parts through)."""
    if m.nbody != builder.nbody or m.ngeom != builder.ngeom or m.npair != own.npair:
        # the same bodies and geoms but other pairs: e.g. the user's own model instead of ``surrogate.hybrid``'s
        raise ConfigError(f"model has {m.nbody} bodies / {m.ngeom} geoms / {m.npair} pairs; the stepper's scene has "
                          f"{builder.nbody} / {builder.ngeom} / {own.npair}: step a model of the stepper's scene (the "
                          "model surrogate.hybrid returned, not the one given to it)", key="model")
    if m is not own:
        g = np.flatnonzero(own.geom_bodyid == getattr(builder, "object_body", -1))
        same = np.array_equal(m.geom_type[g], own.geom_type[g]) and np.allclose(m.geom_size[g], own.geom_size[g],
                                                                                 rtol=1e-6, atol=1e-9)  # XML's digits
        if not same:
            raise ConfigError("model is of another scene than the stepper's: its object's geoms differ (the law's "
                              "length unit is the stepper scene's object size); build the stepper from this model's "
                              "Scene", key="model")
    for i, d in enumerate(datas):
        if d.qpos.shape[0] != m.nq or d.qvel.shape[0] != m.nv or d.ctrl.shape[0] != m.nu:
            raise ConfigError(f"data[{i}] does not belong to this model (nq/nv/nu differ)", key="data")
