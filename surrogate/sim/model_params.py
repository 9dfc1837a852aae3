"""A compiled model's physics values, for telling whether a model was edited in place after something was built
from it (copies of a scene compiled from its spec, a vector env's copies): every parameter array of its bodies,
joints, dofs, geoms, sites, sensors, actuators, tendons, equality constraints and pairs, and its options.

Left out: ids, addresses and counts (structure, which the builders check themselves), names, colours and user data
(no physics), cameras, lights, materials, meshes and textures, and the owned pairs' margin and gap, which the
stepper's contact-mode switch sets at every step (``scenes.set_contact_mode``). A whitelist of a few arrays let
edits through unseen: ``set_grip_force`` (the actuators' force range) or gravity changed a model whose copies kept
stepping the old values.
"""

from __future__ import annotations

import functools

import mujoco
import numpy as np

_PREFIXES = ("actuator_", "body_", "dof_", "eq_", "geom_", "jnt_", "pair_", "qpos0", "qpos_spring", "sensor_", "site_",
             "tendon_", "wrap_")
_NOT_PHYSICS = ("_rgba", "_user", "adr", "num", "id", "_group")
_PHYSICS_ANYWAY = ("geom_fluid",)  # ends in "id" like the ids, but holds the geoms' fluid-interaction coefficients
MODE_FIELDS = ("pair_margin", "pair_gap")  # set by the stepper's contact-mode switch, not by the user
OPTIONS = ("timestep", "integrator", "cone", "solver", "tolerance", "ls_tolerance", "iterations", "ls_iterations",
           "noslip_iterations", "noslip_tolerance", "ccd_iterations", "ccd_tolerance", "impratio", "gravity", "wind",
           "density", "viscosity", "magnetic", "o_margin", "o_solref", "o_solimp", "o_friction", "disableflags",
           "enableflags", "jacobian")


@functools.cache
def _array_names(kind: type) -> tuple[str, ...]:
    """The parameter arrays' names of an ``MjModel`` (its class: the same for every model)."""
    model = mujoco.MjModel.from_xml_string("<mujoco/>")
    return tuple(k for k in dir(kind) if k.startswith(_PREFIXES) and (not k.endswith(_NOT_PHYSICS)
                 or k in _PHYSICS_ANYWAY) and k not in MODE_FIELDS and isinstance(getattr(model, k, None), np.ndarray))


def physics_values(m: mujoco.MjModel, *, skip=()) -> dict[str, np.ndarray]:
    """{name: values} of ``m``'s parameter arrays and options (``opt.<name>``), less the names in ``skip``."""
    out = {k: getattr(m, k) for k in _array_names(type(m)) if k not in skip}
    out.update({f"opt.{k}": np.asarray(getattr(m.opt, k)) for k in OPTIONS if f"opt.{k}" not in skip})
    return out


def physics_fingerprint(m: mujoco.MjModel) -> bytes:
    """``physics_values`` as bytes: equal exactly when no physics value changed (about 50 us for a hand scene)."""
    return b"".join(np.ascontiguousarray(v).tobytes() for v in physics_values(m).values())


def physics_differences(a: mujoco.MjModel, b: mujoco.MjModel, *, skip=()) -> list[str]:
    """The names of the physics values in which two models of one structure differ (bit for bit)."""
    va, vb = physics_values(a, skip=skip), physics_values(b, skip=skip)
    return [k for k in va if va[k].shape != vb[k].shape or not np.array_equal(va[k], vb[k])]
