"""The capture rig's named reference-physics effects, one module each.

Each module states its physical basis in its docstring and exposes ``NAME``,
``DOC`` (one line) and ``PARAMS`` (parameter -> {"kind": float|int, "default",
"range": (low, high), "unit", "doc"}). ``EFFECTS`` is the registry the config
validator, the simulator and the table in docs/rig.md read:

    EFFECTS["stribeck_friction"].params["kinetic_ratio"]["range"]  # (0.3, 1.0)

Every effect has ``enabled: bool`` in the config besides its parameters. With
an effect disabled the rig still uses its own contact law (see each module's
"When disabled"), never MuJoCo's analytic contact.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from surrogate.rig.effects import (
    actuator_delay_backlash,
    compliant_pads,
    friction_map,
    impact_damping,
    load_dependent_friction,
    mass_mismatch,
    pad_relaxation,
    presliding_friction,
    pulp_stiffening,
    soft_finger_torsion,
    stribeck_friction,
)


@dataclass(frozen=True)
class Effect:
    """A registry entry: the module, a one-line description and its parameters with ranges."""

    name: str
    module: ModuleType
    doc: str
    params: dict

    def defaults(self) -> dict:
        """{"enabled": <the module's ENABLED_BY_DEFAULT, True if absent>, <param>: default ...}.

        Every effect is on by default: the built-in defaults are ``configs/rig/default.yaml``, rig v3
        (``configs/rig/v1.yaml`` and ``v2.yaml`` switch the later effects off by name)."""
        on = bool(getattr(self.module, "ENABLED_BY_DEFAULT", True))
        return {"enabled": on, **{k: p["default"] for k, p in self.params.items()}}


EFFECTS: dict[str, Effect] = {
    m.NAME: Effect(m.NAME, m, m.DOC, m.PARAMS)
    for m in (compliant_pads, stribeck_friction, friction_map, actuator_delay_backlash, mass_mismatch,
              load_dependent_friction, soft_finger_torsion, pad_relaxation, presliding_friction, pulp_stiffening,
              impact_damping)
}

# The fingertip effects (rig v2): pad contacts only, state and hidden draws in ``rig.fingertips``. The rig v3
# laws (``pulp_stiffening`` for the pads, ``impact_damping`` for the table) are in ``rig.contact_law`` and
# ``rig.physics``; they draw nothing.
FINGERTIP_EFFECTS = ("load_dependent_friction", "soft_finger_torsion", "pad_relaxation", "presliding_friction")


def effect_table() -> str:
    """Markdown table of every effect, its parameters, defaults and allowed ranges (for docs/rig.md)."""
    rows = ["| effect | what it models | parameter | default | range | unit |", "|---|---|---|---|---|---|"]
    for e in EFFECTS.values():
        first = True
        for k, p in e.params.items():
            lo, hi = p["range"]
            rows.append(f"| {e.name if first else ''} | {e.doc if first else ''} | `{k}` | {p['default']} | "
                        f"{lo} - {hi} | {p['unit']} |")
            first = False
    return "\n".join(rows)


__all__ = ["EFFECTS", "Effect", "FINGERTIP_EFFECTS", "effect_table"]
