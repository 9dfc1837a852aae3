"""The recorder's config section (``recorder``): every key with its default, range and unit, and its check.

The defaults model a real capture rig (the comment above each group gives its basis); the
recorder itself is ``surrogate.rig.recorder``.
"""

from __future__ import annotations

import copy
import math

from ..errors import ConfigError

# Slides of the project's hands (surrogate/scenes/hands.py); every other joint is a hinge.
DEFAULT_PRISMATIC_JOINTS = ["hand_x", "hand_y", "hand_z", "left_slide", "right_slide"]

# (default, low, high, unit) per key; ``None`` bounds mean "not a number" (bool / list).
# The comment above each group gives the real-world basis of its defaults.
_SPEC = {
    # OptiTrack / Vicon systems record at 100-240 Hz; 120 Hz is OptiTrack's default.
    "rate_hz": (120.0, 100.0, 200.0, "Hz"),
    "contact_regions": (16, 1, 256, "regions"),
    "pose": {
        # Rigid-body calibration (marker pivot, camera extrinsics): mm-level, ~0.5 deg.
        "bias_pos_m": (1.0e-3, 0.0, 0.01, "m, std per axis"),
        "bias_rot_deg": (0.5, 0.0, 5.0, "deg, std per axis"),
        # Sub-mm marker noise; on a ~5 cm marker baseline 0.2 mm is ~0.2 deg.
        "jitter_pos_m": (2.0e-4, 0.0, 0.005, "m, std per axis"),
        "jitter_rot_deg": (0.2, 0.0, 2.0, "deg, std per axis"),
        # Fingers within 2 cm of a 3-8 cm object hide its markers from some cameras. At contact
        # 0.02/frame x 8-frame (67 ms) bursts lose ~14 % of frames (~2.4 dropouts/s at 120 Hz).
        "occlusion_distance_m": (0.02, 0.0, 0.2, "m"),
        "dropout_onset_prob": (0.02, 0.0, 1.0, "per frame at contact"),
        "dropout_burst_mean_frames": (8.0, 1.0, 120.0, "frames"),
    },
    "joints": {
        # 12-bit absolute magnetic encoders (e.g. Dynamixel X series): 4096 counts/rev.
        "hinge_counts_per_rev": (4096, 64, 2**24, "counts/rev"),
        # Linear scale of a gripper slide: 10 um.
        "prismatic_resolution_m": (1.0e-5, 1.0e-8, 1.0e-3, "m"),
        "prismatic_joints": (DEFAULT_PRISMATIC_JOINTS, None, None, "joint names"),
    },
    "wrench": {
        "enabled": (True, None, None, "bool"),
        # ATI Nano17 class (SI-25-0.25): +-25 N, +-0.25 N m; noise of a few 1/160 N counts.
        "force_noise_n": (0.02, 0.0, 5.0, "N, std"),
        "torque_noise_nm": (2.0e-4, 0.0, 0.05, "N m, std"),
        # Offset left after taring at the episode start, then thermal drift of strain gauges.
        "force_bias_n": (0.05, 0.0, 5.0, "N, std"),
        "torque_bias_nm": (5.0e-4, 0.0, 0.05, "N m, std"),
        "force_drift_n_per_sqrt_s": (0.02, 0.0, 1.0, "N/sqrt(s)"),
        "torque_drift_nm_per_sqrt_s": (2.0e-4, 0.0, 0.01, "N m/sqrt(s)"),
        "force_range_n": (25.0, 0.1, 1000.0, "N"),
        "torque_range_nm": (0.25, 1.0e-3, 100.0, "N m"),
    },
    "tactile": {
        "enabled": (False, None, None, "bool"),
        # A 4x4 grid over the 2 cm pad (~5 mm pitch, like a uSkin 4x4 patch).
        "rows": (4, 1, 32, "taxels"),
        "cols": (4, 1, 32, "taxels"),
        "pad_size_m": (0.02, 1.0e-3, 0.1, "m"),
        "spread_m": (0.004, 1.0e-4, 0.05, "m, Gaussian sigma of the pressure blob"),
        "noise_n": (0.01, 0.0, 1.0, "N per taxel, std"),
    },
}


def _defaults(spec: dict) -> dict:
    return {k: _defaults(v) if isinstance(v, dict) else copy.deepcopy(v[0]) for k, v in spec.items()}

RECORDER_DEFAULTS = _defaults(_SPEC)


def _check_value(value, entry, key, file):
    default, lo, hi, unit = entry
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"must be true or false, got {value!r}", file=file, key=key)
        return value
    if isinstance(default, list):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"must be a list of {unit}, got {value!r}", file=file, key=key)
        return list(value)
    is_int = isinstance(default, int)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if is_int and ok and float(value) != int(value):
        ok = False
    if not ok or not lo <= value <= hi:
        kind = "an integer" if is_int else "a number"
        raise ConfigError(f"must be {kind} in [{lo:g}, {hi:g}] ({unit}), got {value!r}", file=file, key=key)
    return int(value) if is_int else float(value)


def _validate(section, spec, where, file):
    if not isinstance(section, dict):
        raise ConfigError(f"must be a mapping with keys {sorted(spec)}, got {type(section).__name__}", file=file, key=where)
    out = {}
    for k in section:
        if k not in spec:
            raise ConfigError(f"unknown key; allowed: {sorted(spec)}", file=file, key=f"{where}.{k}")
    for k, entry in spec.items():
        key = f"{where}.{k}"
        if isinstance(entry, dict):
            out[k] = _validate(section.get(k, {}) or {}, entry, key, file)
        else:
            out[k] = _check_value(section[k], entry, key, file) if k in section else copy.deepcopy(entry[0])
    return out


def validate_recorder_config(section: dict | None, *, file=None) -> dict:
    """The ``recorder`` section with defaults filled in; idempotent on its own output.

    Raises:
      ConfigError naming the dotted key (``recorder.pose.jitter_pos_m``) and the allowed
      range or keys, for unknown keys, wrong types and out-of-range values.
    """
    return _validate(section or {}, _SPEC, "recorder", file)
