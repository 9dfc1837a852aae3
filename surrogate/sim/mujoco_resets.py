"""MuJoCo's own resets of an ``MjData`` (a NaN, Inf or huge qpos, qvel or qacc: its ``mjWARN_BADQPOS``, ``BADQVEL``,
``BADQACC`` warnings), detected from the warning counters after every physics step and counted per environment
by the stepper (``Stepper.was_reset``), so a rollout that MuJoCo silently restarted is never mistaken for one that ran."""

from __future__ import annotations

import mujoco
import numpy as np

BAD_STATE_WARNINGS = {int(mujoco.mjtWarning.mjWARN_BADQPOS): "qpos", int(mujoco.mjtWarning.mjWARN_BADQVEL): "qvel",
                      int(mujoco.mjtWarning.mjWARN_BADQACC): "qacc"}
BAD_STATE_IDS = np.array(sorted(BAD_STATE_WARNINGS))
BAD_STATE_SLICE = (slice(int(BAD_STATE_IDS[0]), int(BAD_STATE_IDS[-1]) + 1)
                   if BAD_STATE_IDS[-1] - BAD_STATE_IDS[0] == len(BAD_STATE_IDS) - 1 else None)
NO_BAD_STATE = np.zeros(len(BAD_STATE_IDS), dtype=np.int32).tobytes()


def bad_state_reader(views):
    """A function returning each MjData's bad qpos / qvel / qacc warning counters, as bytes (cheap to
    read and compare: slices of the batch's ``DataViews``, read once per physics step)."""
    if BAD_STATE_SLICE is not None:
        parts = [w[BAD_STATE_SLICE] for w in views.warning_number]
        return lambda: [v.tobytes() for v in parts]
    return lambda: [w[BAD_STATE_IDS].tobytes() for w in views.warning_number]


def count_resets(datas, stepper, before: list, after: list, times, step_no: int) -> None:
    """Count the environments MuJoCo reset in this physics step.

    The counters change only when MuJoCo warns about a bad state, and it then resets the MjData
    (``mj_resetData`` zeroes every counter before counting the one that caused it). So a changed
    counter is a reset, and so is a positive counter on a clock that did not advance (a second
    reset of the same kind leaves its counter at 1).
    """
    reset = [i for i, (b, a) in enumerate(zip(before, after))
             if a != b or (times is not None and a != NO_BAD_STATE and datas[i].time <= times[i])]
    if not reset:
        return
    stepper.was_reset(reset)
    i = reset[0]
    counts = np.frombuffer(after[i], dtype=np.int32)
    kinds = [BAD_STATE_WARNINGS[int(w)] for w, n in zip(BAD_STATE_IDS, counts) if n] or ["state"]
    stepper.warn_once("mujoco_reset", f"MuJoCo reset env {i} at step {step_no} (NaN, Inf or huge {'/'.join(kinds)}): "
                                       f"its state went back to the model's initial one; counted in "
                                       f"stats()['mujoco_resets'] and stats()['mujoco_reset_envs']")
