"""Which objects the ``transfer`` suite tunes and deploys on: a spread over a split or folder, and of the held-out
ones only those the hand can grasp, so that ``data.max_objects`` counts objects deployed on.

A folder of scanned objects (the YCB set) holds many that no parallel jaw spans (a bleach bottle, a skillet lid):
spread first and skipped after, a request for 12 objects of the YCB set deployed on 6. ``deployable`` asks the
grasp planner (``policies.ScriptedGraspPolicy.reset``, through a rig env at the deployment's own reset states)
before it counts an object, and keeps the spread's order.
"""

from __future__ import annotations

import numpy as np


def spread(objs: list, n) -> list:
    """At most ``n`` of ``objs`` spread evenly over the list (splits are family-major: several families, not the
    first family's seeds); all of them for ``n`` None."""
    if not n or n >= len(objs):
        return list(objs)
    return [objs[int(i)] for i in np.unique(np.linspace(0, len(objs) - 1, int(n)).round())]


def deployable(objs: list, n, why_not) -> tuple[list, dict]:
    """(at most ``n`` of ``objs`` that ``why_not(obj)`` lets through (None: it can be grasped), in ``objs``' order,
    {name: why_not's reason} of those it refused). The first pick is ``spread(objs, n)``; each refusal is made good
    from what is left, spread over it the same way, until ``n`` are found or none is left. ``n`` None: all of them
    that can be grasped."""
    chosen, refused, left = [], {}, list(objs)
    while left and (not n or len(chosen) < int(n)):
        pick = spread(left, None if not n else int(n) - len(chosen))
        for obj in pick:
            reason = why_not(obj)
            if reason is None:
                chosen.append(obj)
            else:
                refused[obj.name] = reason
        picked = {id(o) for o in pick}
        left = [o for o in left if id(o) not in picked]
    order = {id(o): i for i, o in enumerate(objs)}
    return sorted(chosen, key=lambda o: order[id(o)]), refused


def rig_grasp_refusal(obj, *, d: dict, rig_cfg, poses: int, seed: int) -> str | None:
    """Why the hand cannot grasp ``obj`` at the deployment's reset states (``poses`` copies, ``seed``), as the rig
    rollout would find at its first step (``rig.scripts.UngraspableObject``); None when it can."""
    from ..policies import GraspParams, ScriptedGraspPolicy
    from ..rig.scripts import UngraspableObject
    from .rig_env import RigGraspVectorEnv

    venv = RigGraspVectorEnv(poses, object=obj, hand=d["hand"], rig_config=rig_cfg, duration=float(d["duration"]))
    try:
        venv.reset(seed=seed)
        ScriptedGraspPolicy(venv.task, GraspParams()).reset()
    except UngraspableObject as e:
        return str(e)
    finally:
        venv.close()
    return None
