"""Checks of the environments' arguments: each refuses a value of the wrong kind or range with a ``ConfigError``
naming the argument and what it must be, at construction (not as a NaN reward or an error deep in MuJoCo later).

Numbers are Python or numpy numbers (a bool or a string is not one); flags are ``True`` / ``False`` (numpy bools
too: ``"false"`` is not a flag, as ``bool("false")`` would read it as True).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..errors import ConfigError


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) and math.isfinite(v)


def finite(key: str, v) -> float:
    """``v`` as a float; ConfigError unless it is a finite number (any sign)."""
    if not _is_number(v):
        raise ConfigError(f"{key} must be a finite number, got {v!r}", key=key)
    return float(v)


def positive(key: str, v, *, at_least: float | None = None, why: str = "") -> float:
    """``v`` as a float; ConfigError unless it is a positive finite number (``at_least``: and >= it, ``why`` says
    what a smaller value would break)."""
    if not (_is_number(v) and v > 0):
        raise ConfigError(f"{key} must be a positive number, got {v!r}", key=key)
    if at_least is not None and v < at_least:
        raise ConfigError(f"{key} must be at least {at_least:g}{why}, got {v!r}", key=key)
    return float(v)


def non_negative(key: str, v) -> float:
    """``v`` as a float; ConfigError unless it is a finite number >= 0."""
    if not (_is_number(v) and v >= 0):
        raise ConfigError(f"{key} must be a number >= 0, got {v!r}", key=key)
    return float(v)


def flag(key: str, v) -> bool:
    """``v`` as a bool; ConfigError unless it is True or False (Python or numpy)."""
    if not isinstance(v, (bool, np.bool_)):
        raise ConfigError(f"{key} must be True or False, got {type(v).__name__} {v!r}", key=key)
    return bool(v)


def whole(key: str, v, *, low: int = 0) -> int:
    """``v`` as an int; ConfigError unless it is an integer (Python or numpy, not a bool) >= ``low``."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral) or v < low:
        raise ConfigError(f"{key} must be an integer >= {low}, got {type(v).__name__} {v!r}", key=key)
    return int(v)


def image_size(width, height) -> tuple[int, int]:
    """(height, width) of rendered images; ConfigError unless both are integers >= 1."""
    return whole("height", height, low=1), whole("width", width, low=1)


def checked_actions(actions, n: int, nu: int, envs: list) -> np.ndarray:
    """[n, nu] float actions; ValueError naming the environment and components if not finite or mis-shaped."""
    try:
        a = np.asarray(actions, dtype=float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"action must be numbers, got {type(actions).__name__} ({e})") from None
    if a.shape != (n, nu):
        raise ValueError(f"action has shape {tuple(a.shape)}; expected {(n, nu)} (environments x actuators)")
    bad = ~np.isfinite(a)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        comps = np.flatnonzero(bad[r]).tolist()
        raise ValueError(f"action of environment {envs[r]} is not finite ({float(a[r, c])} at components {comps}); "
                         "actions must be finite numbers in [-1, 1]")
    return a
