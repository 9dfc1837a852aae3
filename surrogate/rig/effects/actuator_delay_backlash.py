"""Actuator delay and joint backlash: commands arrive late and gears have play.

Physical basis
--------------
A real hand executes a command after a transport and servo latency (bus,
controller cycle, motor driver: ~10 ms for hobby and research hands), and its
gear trains have play: reversing the commanded direction first takes up the
slack before the joint moves. MuJoCo's position actuators act on ``ctrl`` at
once and have no play.

The rig passes the script's commands (``RigTrace.joint_cmd``) through

1. a FIFO at the physics rate: the servo sees the command sent ``delay`` seconds
   earlier, ``delay ~ U(delay_min, delay_max)`` drawn per episode;
2. a play (backlash) operator per joint on the delayed position target:
   ``y = clip(y_prev, u - w/2, u + w/2)``, width ``w`` drawn per episode and joint
   from ``backlash_slide`` (m) for prismatic and ``backlash_hinge`` (rad) for
   hinge joints.

When disabled: the servo sees the command as sent.
"""

from __future__ import annotations

import numpy as np

NAME = "actuator_delay_backlash"
DOC = "commands delayed 8-14 ms (FIFO) and joint play on the position target; off: commands act at once"
PARAMS = {
    "delay_min": {"kind": "float", "default": 0.008, "range": (0.0, 0.1), "unit": "s",
                  "doc": "shortest command latency"},
    "delay_max": {"kind": "float", "default": 0.014, "range": (0.0, 0.1), "unit": "s",
                  "doc": "longest command latency"},
    "backlash_slide_min": {"kind": "float", "default": 0.0005, "range": (0.0, 0.01), "unit": "m",
                           "doc": "smallest play width of prismatic joints"},
    "backlash_slide_max": {"kind": "float", "default": 0.002, "range": (0.0, 0.01), "unit": "m",
                           "doc": "largest play width of prismatic joints"},
    "backlash_hinge_min": {"kind": "float", "default": 0.0087, "range": (0.0, 0.1), "unit": "rad",
                           "doc": "smallest play width of hinge joints (0.5 deg)"},
    "backlash_hinge_max": {"kind": "float", "default": 0.026, "range": (0.0, 0.1), "unit": "rad",
                           "doc": "largest play width of hinge joints (1.5 deg)"},
}


class ActuatorChannel:
    """The path from the script's command to the servo target.

    Args:
      initial: [J] command at t = 0 (the FIFO starts full of it).
      dt: s, physics step.
      is_hinge: [J] bool, hinge (True) or prismatic joint.
      params: the effect's parameters, or None when disabled.
      rng: draws the delay and the play widths.
    """

    def __init__(self, initial, dt: float, is_hinge, params: dict | None, rng: np.random.Generator):
        initial = np.asarray(initial, dtype=float)
        self.params = params
        if params is None:
            self.delay, self.width = 0.0, np.zeros_like(initial)
            self.steps = 0
        else:
            self.delay = float(rng.uniform(params["delay_min"], params["delay_max"]))
            hinge = np.asarray(is_hinge, dtype=bool)
            u = rng.uniform(size=len(initial))
            slide = params["backlash_slide_min"] + u * (params["backlash_slide_max"] - params["backlash_slide_min"])
            hing = params["backlash_hinge_min"] + u * (params["backlash_hinge_max"] - params["backlash_hinge_min"])
            self.width = np.where(hinge, hing, slide)
            self.steps = int(round(self.delay / dt))
        # FIFO as a ring buffer of the last ``steps`` commands.
        self.ring = np.tile(initial, (max(self.steps, 1), 1))
        self.head = 0
        self.half = 0.5 * self.width
        self.y = initial.copy()

    def __call__(self, command) -> np.ndarray:
        """Push this step's command; return the servo target that acts now."""
        if self.params is None:
            return np.array(command, dtype=float)
        if self.steps > 0:
            u = self.ring[self.head].copy()  # sent ``steps`` steps ago
            self.ring[self.head] = command
            self.head = (self.head + 1) % self.steps
        else:
            u = np.array(command, dtype=float)
        self.y = np.minimum(np.maximum(self.y, u - self.half), u + self.half)
        return self.y.copy()

    def describe(self) -> dict:
        return {"delay_s": self.delay, "delay_steps": self.steps, "backlash": [float(w) for w in self.width]}
