"""Impact-remembering table contact: Lankarani-Nikravesh damping from the approach speed at first touch.

Physical basis
--------------
A rigid object hitting or resting on a rigid table loses energy in the contact by a hysteresis
loop whose size is set by the coefficient of restitution ``e``. Lankarani and Nikravesh derived the
damping that dissipates exactly the energy ``e`` implies for an impact at approach speed
``v0`` (Lankarani and Nikravesh 1990, "A contact force model with hysteresis damping for impact
analysis of multibody systems", J. Mech. Des. 112(3):369-376; reviewed with its alternatives in
Flores, Machado, Silva and Martins 2011, "On the continuous contact force models for soft materials
in multibody dynamics", Multibody Syst. Dyn. 25:357-375)::

    f = k delta^n (1 + 3 (1 - e^2) / 4 * d(delta)/dt / v0),   f >= 0

with ``k delta^n`` the Hertzian spring of the table contact (``physics.support_stiffness``,
``physics.support_exponent``) at each object surface sample point. The damping coefficient is not a
constant of the material: it is ``3 (1 - e^2) / (4 v0)``, with ``v0`` the normal approach speed the
point had *when it first touched* and remembered until it separates, so the same penetration and
rate give a different force after a hard drop than after a gentle placement. The learned law's
Hunt-Crossley damping ``c`` is one number per contact with no memory of how the contact began.

``v0`` is floored at ``impact_speed_min``: the model divides by the impact speed, which is zero for a
point that touches while the object rolls or rests (Lankarani and Nikravesh derive it for e near 1
and impacts; the floor bounds the damping at ``3 (1 - e^2) / (4 v_min)``).

Parameter ranges (config): ``restitution`` e 0.05 - 0.99 (wood, plastic and metal objects on a table:
about 0.3 - 0.8), ``impact_speed_min`` 1 mm/s - 1 m/s.

State: one remembered speed per table sample point (``rig.physics``), set at the step a point's
penetration becomes positive, cleared when it separates; advanced only by stepping, never by
``evaluate``.

When disabled: the constant Hunt-Crossley damping ``physics.support_damping`` (rig v1 and v2).
"""

from __future__ import annotations

import numpy as np

NAME = "impact_damping"
DOC = ("table: damping 3(1-e^2)/(4 v0) from the approach speed v0 remembered at first touch (Lankarani and "
       "Nikravesh 1990); off: constant Hunt-Crossley damping")
PARAMS = {
    "restitution": {"kind": "float", "default": 0.5, "range": (0.05, 0.99), "unit": "1",
                    "doc": "coefficient of restitution e of object-table impacts"},
    "impact_speed_min": {"kind": "float", "default": 0.02, "range": (0.001, 1.0), "unit": "m/s",
                         "doc": "floor of the remembered approach speed v0 (resting and rolling touches)"},
}


def remember(memory: np.ndarray, touching: np.ndarray, approach: np.ndarray, *, impact_speed_min: float) -> np.ndarray:
    """The remembered approach speeds after this step.

    Args:
      memory: [S] m/s per sample point, 0 where it was not in contact.
      touching: [S] bool, in contact this step.  approach: [S] m/s, ``-v_n`` (positive approaching).
    Returns:
      [S]: kept where the point was already touching, ``max(approach, impact_speed_min)`` where it
      touches for the first time, 0 where it does not touch.
    """
    first = np.maximum(approach, impact_speed_min)
    return np.where(touching, np.where(memory > 0.0, memory, first), 0.0)


def damping(v0, *, restitution: float) -> np.ndarray:
    """[S] s/m: the Lankarani-Nikravesh damping coefficient ``3 (1 - e^2) / (4 v0)`` for speeds ``v0`` [S] > 0."""
    return 0.75 * (1.0 - restitution * restitution) / np.asarray(v0, dtype=float)
