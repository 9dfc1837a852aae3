"""The hybrid stepper's fast path (the speed issue): per-batch array views and the law step's batched solve."""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from surrogate.bench.speed import grasped_state
from surrogate.model.checkpoint import load_checkpoint
from surrogate.objects import make_object
from surrogate.paths import release_checkpoint
from surrogate.scenes import build_scene
from surrogate.sim import Stepper, step

torch.set_num_threads(1)


def test_law_step_batched_equals_single_with_one_stepper_switching_batches():
    """One stepper steps a batch of three and the same three one at a time, alternating every physics step
    (its array views must follow each call's MjData), with a MuJoCo reset of one environment in between;
    the batch takes both solve layouts (equal and unequal contact counts) and equals the singles."""
    scene = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")
    m = scene.model
    d0 = grasped_state(scene, seconds=0.9)
    st = Stepper(scene, load_checkpoint(release_checkpoint("rig_default"))[0])

    def starts():
        out = []
        for k in range(3):  # different kicks: the pads' contacts come and go at different steps
            d = mujoco.MjData(m)
            mujoco.mj_copyData(d, m, d0)
            d.qvel[scene.object_dof_adr:scene.object_dof_adr + 3] += [0.3 * k, 0.0, 0.2 * k]
            out.append(d)
        return out

    batch, singles = starts(), starts()
    layouts = set()
    for k in range(60):
        if k == 30:  # MuJoCo's reset writes into the same arrays: the views stay valid
            for d in (batch[1], singles[1]):
                mujoco.mj_resetData(m, d)
        step(m, batch, st)
        layouts.add(len(set(np.bincount(st._last[0].env, minlength=3).tolist())) == 1 if st._last else None)
        for d in singles:
            step(m, d, st)
    assert {True, False} <= layouts, layouts
    a = np.array([np.concatenate([d.qpos, d.qvel]) for d in batch])
    b = np.array([np.concatenate([d.qpos, d.qvel]) for d in singles])
    assert np.isfinite(a).all() and st.stats()["fallbacks"] == 0
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)
