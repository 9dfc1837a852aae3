"""Mass mismatch: the real object's mass, centre of mass and inertia differ from the nominal values.

Physical basis
--------------
What a user enters for an object (a catalogue mass, a COM at the geometric
centre of a uniform-density model, the inertia of that model) is never exactly
the object: scales err, density is not uniform (hollow parts, inserts, glue,
paint), so the true COM sits millimetres off and the inertia differs. The rig
simulates the true values and records the nominal ones in
``RigTrace.object_nominal`` (the true ones in ``RigTrace.object_true``):

    mass_true = mass * U(mass_scale_min, mass_scale_max)
    com_offset ~ uniform in a ball of radius com_offset_max (body frame, m)
    inertia_true = inertia * (mass_true / mass) * U(inertia_scale_min, inertia_scale_max)

(a common factor on the principal moments keeps the tensor physical). The
geometry frame is unchanged: poses in the trace are those of the geometry
frame, whose origin is the nominal COM.

When disabled: the nominal values are simulated.
"""

from __future__ import annotations

import mujoco
import numpy as np

NAME = "mass_mismatch"
DOC = "true mass x U(0.85, 1.15), COM a few mm off, inertia rescaled; the trace keeps nominal values"
PARAMS = {
    "mass_scale_min": {"kind": "float", "default": 0.85, "range": (0.2, 1.0), "unit": "1",
                       "doc": "lowest true / nominal mass"},
    "mass_scale_max": {"kind": "float", "default": 1.15, "range": (1.0, 5.0), "unit": "1",
                       "doc": "highest true / nominal mass"},
    "com_offset_max": {"kind": "float", "default": 0.004, "range": (0.0, 0.02), "unit": "m",
                       "doc": "radius of the ball the true COM is drawn from"},
    "inertia_scale_min": {"kind": "float", "default": 0.9, "range": (0.2, 1.0), "unit": "1",
                          "doc": "lowest extra inertia factor (beyond the mass ratio)"},
    "inertia_scale_max": {"kind": "float", "default": 1.1, "range": (1.0, 5.0), "unit": "1",
                          "doc": "highest extra inertia factor"},
}


def draw_true_mass_properties(mass: float, inertia, params: dict | None, rng: np.random.Generator) -> dict:
    """The simulated mass properties: {"mass": kg, "inertia": [3, 3], "com_offset": [3] m (body frame)}."""
    inertia = np.asarray(inertia, dtype=float)
    if params is None:
        return {"mass": float(mass), "inertia": inertia.copy(), "com_offset": np.zeros(3)}
    ratio = rng.uniform(params["mass_scale_min"], params["mass_scale_max"])
    direction = rng.normal(size=3)
    direction /= np.linalg.norm(direction)
    radius = params["com_offset_max"] * rng.uniform() ** (1.0 / 3.0)  # uniform in the ball
    extra = rng.uniform(params["inertia_scale_min"], params["inertia_scale_max"])
    return {"mass": float(mass * ratio), "inertia": inertia * ratio * extra, "com_offset": direction * radius}


def apply_to_spec(spec: mujoco.MjSpec, body_name: str, true: dict) -> None:
    """Write ``true`` mass properties into the object body of a scene's ``MjSpec`` (recompile after).

    Editing the spec, not the compiled model, is required: MuJoCo compiles a body
    whose inertial frame equals its body frame as "simple" and cannot move its COM
    afterwards.
    """
    from surrogate.scenes.object_body import full_inertia_vector

    body = spec.body(body_name)
    body.explicitinertial = True
    body.mass = float(true["mass"])
    body.ipos = [float(v) for v in true["com_offset"]]
    body.fullinertia = full_inertia_vector(true["inertia"])
