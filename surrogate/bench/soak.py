"""Soak test: long hybrid rollouts of scripted grasps on many objects; nothing may blow up.

    report = soak("checkpoints/rig_default", load_split("heldout"), steps=1000)
    assert report["ok"], report["failures"]

Per object, ``n_envs`` copies (different object yaw and offset) run a scripted grasp (approach,
close, lift, hold) with surrogate contact for ``steps`` environment steps of ``control_dt``
(one batched network call per physics step). An object passes when every state stays finite
and it never leaves the scene (off the table top's area or 5 cm below its surface) unless it
was dropped first (lifted, then lost). Ungraspable objects (wider than the open hand) are
listed and skipped. Fallbacks and out-of-training-range inputs are reported, not failures.
"""

from __future__ import annotations

import logging
import time
import warnings
from pathlib import Path

import numpy as np

from ..envs.grasp import GraspVectorEnv
from ..policies import GraspParams, ScriptedGraspPolicy
from ..rig.scripts import UngraspableObject

log = logging.getLogger(__name__)


def soak(checkpoint, objects, *, steps: int = 1000, hand: str = "parallel_jaw", n_envs: int = 2,
         control_dt: float = 0.004, seed: int = 0, contact_model=None, contact: str = "surrogate",
         progress: bool = False) -> dict:
    """Run the soak test.

    Args:
      checkpoint: checkpoint folder (ignored if ``contact_model`` is given).
      objects: ``ObjectAsset`` list (e.g. ``load_split("heldout")``).
      steps: environment steps per rollout, each ``control_dt`` s of physics (default 4 ms = 2 physics
        steps: 1000 steps = 4 s, approach, close, lift and about 2 s of hold).
      hand: ``parallel_jaw``, ``three_finger`` or ``jaco`` (``envs.task.HANDS``).
      n_envs: copies per object (batched together).
      contact: ``surrogate`` or ``analytic`` (the same rollouts under MuJoCo's contact, to tell
        the policy's failures from the surrogate's).
    Returns:
      {"ok": bool, "objects": [per-object dict: name, finite, left_scene, dropped, lifted, max_speed (m/s),
       max_rise_m, fallbacks, ood_contact_fraction, seconds], "failures": [names], "skipped": [names], "steps": steps}.
    """
    if contact_model is None and contact == "surrogate":
        from ..model.checkpoint import load_checkpoint

        contact_model = load_checkpoint(Path(checkpoint))[0]
    rows, failures, skipped = [], [], []
    for obj in objects:
        t0 = time.perf_counter()
        venv = GraspVectorEnv(n_envs, copies=False, hand=hand, object=obj, contact=contact, contact_model=contact_model,
                              control_dt=control_dt, max_episode_steps=None)
        task = venv.task
        venv.reset(seed=seed)
        try:
            policy = ScriptedGraspPolicy(task, GraspParams())
            policy.reset()
        except UngraspableObject as e:
            skipped.append({"name": obj.name, "reason": str(e)})
            continue
        finite = np.ones(n_envs, dtype=bool)
        left = np.zeros(n_envs, dtype=bool)
        dropped = np.zeros(n_envs, dtype=bool)
        max_speed, max_rise = np.zeros(n_envs), np.zeros(n_envs)
        stopped = np.zeros(n_envs, dtype=bool)  # no longer simulated: non-finite or left the scene
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # counted in the stepper's stats and reported below
            for k in range(steps):
                live = np.flatnonzero(~stopped)
                if not len(live):
                    break
                task.apply_action(policy(k * control_dt)[live], live)
                task.simulate(live)
                _, term, info = task.evaluate(live)
                for j, i in enumerate(live):
                    d = task.datas[i]
                    ok = bool(np.isfinite(d.qpos).all() and np.isfinite(d.qvel).all())
                    finite[i] &= ok
                    dropped[i] |= bool(info["dropped"][j])
                    if ok:
                        v = d.qvel[task.scene.object_dof_adr:task.scene.object_dof_adr + 3]
                        max_speed[i] = max(max_speed[i], float(np.linalg.norm(v)))
                        max_rise[i] = max(max_rise[i], float(info["rise"][j]))
                    if info["off_table"][j]:
                        left[i] = ok
                        stopped[i] = True
        st = task.stepper.stats()
        bad = (~finite) | (left & ~dropped)
        row = {"name": obj.name, "finite": bool(finite.all()), "left_scene": int(left.sum()),
               "left_without_drop": int((left & ~dropped).sum()), "dropped": int(dropped.sum()),
               "lifted": int(task.lifted.sum()), "max_speed": float(max_speed.max()),
               "max_rise_m": float(max_rise.max()), "fallbacks": st["fallbacks"],
               "ood_contact_fraction": st["ood_edges"] / max(st["contacts"], 1),
               "seconds": time.perf_counter() - t0}
        rows.append(row)
        if bad.any():
            failures.append(obj.name)
        if progress:
            log.info("%s: %s", obj.name, row)
    return {"ok": not failures, "objects": rows, "failures": failures, "skipped": skipped, "steps": steps,
            "hand": hand, "n_envs": n_envs}
