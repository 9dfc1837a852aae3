"""The capture rig's config: ``physics``, ``effects``, ``script`` and ``recorder``.

    cfg = load_rig_config()                                   # configs/rig/default.yaml
    cfg = load_rig_config(path, ["effects.friction_map.enabled=false", "physics.max_timestep=5e-4"])
    cfg = only_effect(cfg, "stribeck_friction")               # gap attribution: one effect on
    cfg = only_effect(cfg, None)                              # all effects off

Sections
--------
``physics``  the rig's step and its baseline contact law (table support, the rigid
             point pad used when ``compliant_pads`` is off, friction regularization).
``effects``  one entry per named effect (``surrogate.rig.effects.EFFECTS``):
             ``enabled: bool`` plus the effect's parameters.
``script``   randomization ranges of the scripted grasp episodes.
``recorder`` owned by the recorder; passed through untouched (``rate_hz`` is read
             by the simulator, default 120).

Validation: unknown section / effect / parameter names raise ``ConfigError``
naming the key and listing the allowed names; every numeric parameter has an
allowed range, and a value outside it raises ``ConfigError`` naming the key and
the range; ``*_min`` / ``*_max`` (and ``low`` / ``high``) pairs must be ordered.
Missing keys take their defaults, so a config file may list only what it changes.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable
from pathlib import Path

from surrogate.config import apply_overrides, check_keys, load_yaml, merge, naming_overrides
from surrogate.errors import ConfigError
from surrogate.paths import CONFIG_DIR
from surrogate.rig.effects import EFFECTS

DEFAULT_CONFIG = CONFIG_DIR / "rig" / "default.yaml"
SECTIONS = ("physics", "effects", "script", "recorder")
DEFAULT_RATE_HZ = 120.0


def _p(kind, default, lo, hi, unit, doc):
    return {"kind": kind, "default": default, "range": (lo, hi), "unit": unit, "doc": doc}


PHYSICS_PARAMS = {
    "max_timestep": _p("float", 1.0e-3, 1.0e-4, 1.0e-3, "s",
                       "largest physics step; the step is the frame period / ceil(period / max_timestep)"),
    "point_stiffness": _p("float", 5.0e4, 1.0e3, 1.0e7, "N/m",
                          "rigid single-point pad contact (used when compliant_pads is off)"),
    "point_damping": _p("float", 5.0, 0.0, 50.0, "s/m", "Hunt-Crossley damping of the rigid point pad"),
    "support_stiffness": _p("float", 2.0e6, 1.0e4, 1.0e9, "N/m^p",
                            "table contact, per object surface sample point: f = k delta^p (1 + c rate)"),
    "support_exponent": _p("float", 1.5, 1.0, 2.0, "1", "table contact exponent p"),
    "support_damping": _p("float", 5.0, 0.0, 50.0, "s/m", "table contact Hunt-Crossley damping c"),
    "support_samples": _p("int", 64, 0, 1024, "points per piece",
                          "surface samples per convex piece, besides its hull vertices, for table contact"),
    "friction_regularization": _p("float", 1.0e-3, 1.0e-5, 0.05, "m/s",
                                  "eps of the regularized Coulomb law (creep speed scale)"),
}

SCRIPT_PARAMS = {
    "duration": _p("float", 4.0, 0.1, 30.0, "s", "episode length (simulate_episode's duration overrides)"),
    "approach_time": _p("float", 0.6, 0.1, 5.0, "s", "move above the grasp pose and descend"),
    "close_time": _p("float", 0.4, 0.05, 5.0, "s", "close the fingers"),
    "settle_time": _p("float", 0.2, 0.0, 5.0, "s", "hold closed on the table"),
    "lift_time": _p("float", 0.6, 0.1, 5.0, "s", "lift"),
    "hold_time": _p("float", 0.5, 0.0, 10.0, "s", "hold still in the air (the perturbation fills the rest)"),
    "object_yaw_max": _p("float", 3.1416, 0.0, 3.1416, "rad", "object yaw on the table ~ U(-max, max)"),
    "grasp_offset_max": _p("float", 0.004, 0.0, 0.02, "m", "grasp centre offset from the COM, each of x, y"),
    "grasp_yaw_noise": _p("float", 0.15, 0.0, 1.6, "rad", "grasp yaw noise around the chosen grasp direction"),
    "grasp_height_offset_max": _p("float", 0.004, 0.0, 0.02, "m", "grasp height offset ~ U(-max, max)"),
    "clearance": _p("float", 0.004, 0.0, 0.02, "m", "required gap between the open pads and the object"),
    "grip_force_parallel_jaw_min": _p("float", 0.25, 0.1, 100.0, "N", "closing force per jaw, low (log-uniform)"),
    "grip_force_parallel_jaw_max": _p("float", 12.0, 0.1, 100.0, "N", "closing force per jaw, high"),
    "grip_force_three_finger_min": _p("float", 0.3, 0.1, 50.0, "N", "fingertip force bound, low (log-uniform)"),
    "grip_force_three_finger_max": _p("float", 5.0, 0.1, 50.0, "N", "fingertip force bound, high"),
    # Optional (``OPTIONAL_SCRIPT_KEYS``): not in the defaults, so a config that does not set them hashes as before
    "grip_force_jaco_min": _p("float", 2.0, 0.1, 50.0, "N", "Jaco fingertip force bound, low (log-uniform)"),
    "grip_force_jaco_max": _p("float", 8.0, 0.1, 50.0, "N", "Jaco fingertip force bound, high"),
    "lift_height_min": _p("float", 0.06, 0.02, 0.3, "m", "lift height, low"),
    "lift_height_max": _p("float", 0.12, 0.02, 0.3, "m", "lift height, high"),
    # Optional: a lift that starts at once at a constant speed, as a scripted policy's (``policies.ScriptedGraspPolicy``)
    # does, instead of the minimum-jerk profile over ``lift_time`` (drawn from the episode's own ``lift`` generator)
    "lift_ramp_probability": _p("float", 0.0, 0.0, 1.0, "1", "probability of a constant-speed lift that starts at once"),
    "lift_ramp_speed_min": _p("float", 0.1, 0.01, 1.0, "m/s", "constant lift speed, low (log-uniform)"),
    "lift_ramp_speed_max": _p("float", 0.3, 0.01, 1.0, "m/s", "constant lift speed, high"),
    "shake_probability": _p("float", 0.5, 0.0, 1.0, "1", "probability of a shake (else a rotation)"),
    "shake_amplitude_min": _p("float", 0.005, 0.0, 0.1, "m", "shake amplitude, low"),
    "shake_amplitude_max": _p("float", 0.03, 0.0, 0.1, "m", "shake amplitude, high"),
    "shake_frequency_min": _p("float", 1.0, 0.1, 10.0, "Hz", "shake frequency, low"),
    "shake_frequency_max": _p("float", 5.0, 0.1, 10.0, "Hz", "shake frequency, high"),
    "rotate_amplitude_min": _p("float", 0.2, 0.0, 3.0, "rad", "yaw rotation amplitude, low"),
    "rotate_amplitude_max": _p("float", 0.8, 0.0, 3.0, "rad", "yaw rotation amplitude, high"),
    "rotate_frequency_min": _p("float", 0.5, 0.1, 10.0, "Hz", "yaw rotation frequency, low"),
    "rotate_frequency_max": _p("float", 2.0, 0.1, 10.0, "Hz", "yaw rotation frequency, high"),
    # Rig v2 perturbations that load the pads in torsion (drawn from the ``perturbation`` generator, so
    # probability 0 leaves every other draw of a seed as it was): ``swing`` oscillates the hand
    # horizontally across the grasp axis (the object's inertia twists it about the axis between the
    # pads); ``lever`` grasps off the COM across that axis and bounces vertically (gravity and the
    # bounce twist it by m (g + a) e). The hand has no wrist, so a tilt of the hand is this load.
    "swing_probability": _p("float", 0.25, 0.0, 1.0, "1", "probability of a swing across the grasp axis"),
    "swing_amplitude_min": _p("float", 0.005, 0.0, 0.1, "m", "swing amplitude, low"),
    "swing_amplitude_max": _p("float", 0.02, 0.0, 0.1, "m", "swing amplitude, high"),
    "swing_frequency_min": _p("float", 1.5, 0.1, 10.0, "Hz", "swing frequency, low"),
    "swing_frequency_max": _p("float", 4.0, 0.1, 10.0, "Hz", "swing frequency, high"),
    "lever_probability": _p("float", 0.25, 0.0, 1.0, "1",
                            "probability of an off-centre grasp with vertical bounces (torsion about the grasp axis)"),
    "lever_offset_min": _p("float", 0.004, 0.0, 0.03, "m", "grasp offset from the COM across the grasp axis, low"),
    "lever_offset_max": _p("float", 0.012, 0.0, 0.03, "m", "grasp offset across the grasp axis, high"),
    "lever_amplitude_min": _p("float", 0.005, 0.0, 0.1, "m", "bounce amplitude, low"),
    "lever_amplitude_max": _p("float", 0.02, 0.0, 0.1, "m", "bounce amplitude, high"),
    "lever_frequency_min": _p("float", 1.0, 0.1, 10.0, "Hz", "bounce frequency, low"),
    "lever_frequency_max": _p("float", 3.0, 0.1, 10.0, "Hz", "bounce frequency, high"),
    "lift_threshold": _p("float", 0.02, 0.001, 0.2, "m", "label lifted: the object rose more than this"),
    "slip_threshold": _p("float", 0.005, 0.0005, 0.1, "m",
                         "label slipped: object displacement relative to the hand during hold/perturbation"),
    "slip_angle_threshold": _p("float", 0.1745, 0.01, 3.1416, "rad",
                               "label slipped: object rotation relative to the hand during hold/perturbation (pivoting in the grip)"),
}

# Pairs that must satisfy low <= high: (low key, high key) per section.
_ORDERED = {
    "friction_map": [("low", "high"), ("wavelength_min", "wavelength_max")],
}


def _ordered_pairs(params: dict) -> list[tuple[str, str]]:
    pairs = [(k, k[:-4] + "_max") for k in params if k.endswith("_min") and k[:-4] + "_max" in params]
    return pairs


def effect_names() -> tuple[str, ...]:
    """Names of the rig's effects, in registry order."""
    return tuple(EFFECTS)


# Keys a config may set but the defaults leave out (their defaults apply where read: ``script_value``): the Jaco hand's
# grip range and the constant-speed lifts came after the captures of the other hands and of the smooth lifts, whose
# config hash (``rig.recorder.config_hash``) they keep.
OPTIONAL_SCRIPT_KEYS = ("grip_force_jaco_min", "grip_force_jaco_max", "lift_ramp_probability", "lift_ramp_speed_min",
                        "lift_ramp_speed_max")


def script_value(script: dict, key: str):
    """``script[key]``, or its default for an optional key the config leaves out."""
    return script[key] if key in script or key not in OPTIONAL_SCRIPT_KEYS else SCRIPT_PARAMS[key]["default"]


def default_rig_config() -> dict:
    """The built-in defaults (equal to ``configs/rig/default.yaml``), recorder empty."""
    return {
        "physics": {k: p["default"] for k, p in PHYSICS_PARAMS.items()},
        "effects": {name: e.defaults() for name, e in EFFECTS.items()},
        "script": {k: p["default"] for k, p in SCRIPT_PARAMS.items() if k not in OPTIONAL_SCRIPT_KEYS},
        "recorder": {},
    }


def _check_value(value, spec: dict, key: str, file):
    lo, hi = spec["range"]
    unit = "" if spec["unit"] in ("1",) else f" {spec['unit']}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"must be a number in [{lo}, {hi}]{unit}, got {value!r}", file=file, key=key)
    if spec["kind"] == "int":
        if isinstance(value, float) and not value.is_integer():
            raise ConfigError(f"must be an integer in [{lo}, {hi}]{unit}, got {value!r}", file=file, key=key)
        value = int(value)
    else:
        value = float(value)
    if not math.isfinite(value) or not (lo <= value <= hi):
        raise ConfigError(f"{value!r} is out of range [{lo}, {hi}]{unit}", file=file, key=key)
    return value


def _check_section(section, params: dict, where: str, file, *, extra=()) -> dict:
    if not isinstance(section, dict):
        raise ConfigError(f"must be a mapping, got {type(section).__name__}", file=file, key=where)
    check_keys(section, list(params) + list(extra), where=where, file=file)
    out = {}
    for k, v in section.items():
        if k in extra:
            out[k] = v
            continue
        out[k] = _check_value(v, params[k], f"{where}.{k}", file)
    for lo_key, hi_key in _ordered_pairs(params) + _ORDERED.get(where.split(".")[-1], []):
        if lo_key in out and hi_key in out and out[lo_key] > out[hi_key]:
            raise ConfigError(f"{lo_key} = {out[lo_key]} must not exceed {hi_key} = {out[hi_key]}",
                              file=file, key=f"{where}.{lo_key}")
    if where == "script" and out.get("swing_probability", 0.0) + out.get("lever_probability", 0.0) > 1.0:
        raise ConfigError(f"swing_probability + lever_probability = "
                          f"{out['swing_probability'] + out['lever_probability']} must not exceed 1",
                          file=file, key="script.swing_probability")
    return out


def validate_rig_config(cfg: dict, *, file=None) -> dict:
    """A checked, complete copy of ``cfg`` (missing keys filled with defaults).

    Raises:
      ConfigError: naming the key: unknown section / effect / parameter (with the
        allowed names), wrong type, a value outside its range (with the range),
        or an unordered min/max pair.
    """
    if not isinstance(cfg, dict):
        raise ConfigError(f"rig config must be a mapping, got {type(cfg).__name__}", file=file)
    check_keys(cfg, SECTIONS, where="", file=file)
    full = merge(default_rig_config(), cfg)
    out = {
        "physics": _check_section(full["physics"], PHYSICS_PARAMS, "physics", file),
        "script": _check_section(full["script"], SCRIPT_PARAMS, "script", file),
    }
    effects = full["effects"]
    if not isinstance(effects, dict):
        raise ConfigError(f"must be a mapping, got {type(effects).__name__}", file=file, key="effects")
    check_keys(effects, EFFECTS, where="effects", file=file)
    out["effects"] = {}
    for name, e in EFFECTS.items():
        sec = effects[name]
        where = f"effects.{name}"
        if not isinstance(sec, dict):
            raise ConfigError(f"must be a mapping with 'enabled' and parameters, got {sec!r}", file=file, key=where)
        checked = _check_section(sec, e.params, where, file, extra=("enabled",))
        if not isinstance(checked.get("enabled"), bool):
            raise ConfigError(f"must be true or false, got {checked.get('enabled')!r}", file=file, key=f"{where}.enabled")
        out["effects"][name] = checked
    rec = full["recorder"]
    if rec is None:
        rec = {}
    if not isinstance(rec, dict):
        raise ConfigError(f"must be a mapping, got {type(rec).__name__}", file=file, key="recorder")
    out["recorder"] = copy.deepcopy(rec)
    return out


def load_rig_config(path: str | Path | None = None, overrides: Iterable[str] = ()) -> dict:
    """Load, override (``a.b.c=value``) and validate a rig config.

    Args:
      path: YAML file (default ``configs/rig/default.yaml``).
      overrides: ``KEY=VALUE`` strings with dotted keys, values parsed as YAML.
    Returns:
      The complete, checked config dict (sections ``physics``, ``effects``, ``script``, ``recorder``).
    Raises:
      ConfigError naming the file and the key.
    """
    path = DEFAULT_CONFIG if path is None else Path(path)
    raw = load_yaml(path)
    with naming_overrides(list(overrides)):
        return validate_rig_config(apply_overrides(raw, list(overrides), file=path), file=path)


def only_effect(cfg: dict, name: str | None) -> dict:
    """A copy of ``cfg`` with only effect ``name`` enabled (``None``: all effects off)."""
    if name is not None and name not in EFFECTS:
        raise ConfigError(f"unknown effect; allowed: {sorted(EFFECTS)}", key=f"effects.{name}")
    out = copy.deepcopy(cfg)
    for e in EFFECTS:
        out.setdefault("effects", {}).setdefault(e, {})["enabled"] = e == name
    return validate_rig_config(out)


def with_effects(cfg: dict, enabled: dict[str, bool]) -> dict:
    """A copy of ``cfg`` with the named effects switched on/off (others unchanged)."""
    out = copy.deepcopy(cfg)
    for name, on in enabled.items():
        if name not in EFFECTS:
            raise ConfigError(f"unknown effect; allowed: {sorted(EFFECTS)}", key=f"effects.{name}")
        out["effects"][name]["enabled"] = bool(on)
    return validate_rig_config(out)


def recorder_rate_hz(cfg: dict) -> float:
    """The recorder's frame rate (Hz): ``cfg["recorder"]["rate_hz"]``, default 120."""
    rate = (cfg.get("recorder") or {}).get("rate_hz", DEFAULT_RATE_HZ)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (1.0 <= rate <= 2000.0):
        raise ConfigError(f"must be a number in [1, 2000] Hz, got {rate!r}", key="recorder.rate_hz")
    return float(rate)
