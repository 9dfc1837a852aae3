"""The stepper's reads of a batch (the speed issue, batch 256): contact views reused while an environment's
contact count stays, and batches built without the graph's arrays for a constant law."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from surrogate.model.batch_graph import GraphBuilder
from surrogate.model.checkpoint import load_checkpoint
from surrogate.model.data_views import DataViews
from surrogate.objects import make_object
from surrogate.paths import release_checkpoint
from surrogate.scenes import build_scene, set_contact_mode
from surrogate.sim import Stepper, step
from surrogate.sim.hybrid_step import needs_graph
from tests.test_speed_law_step import _kicked_batch

torch.set_num_threads(1)


def test_reused_contact_views_read_every_steps_contacts():
    """One ``DataViews`` over 40 steps of kicked grasps (contacts come and go), a reset and a copy in between:
    every step its contact arrays equal fresh reads of ``data.contact``, and an environment's views are reused
    while its count stays (the views are remade only when it changes)."""
    scene = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")
    m = scene.model
    datas = _kicked_batch(scene, 3, 0.4)
    set_contact_mode(m, scene, "external")  # the owned pairs push nothing: the kicked objects leave the pads
    views = DataViews(datas)
    reused = changed = 0
    for k in range(40):
        if k == 15:
            mujoco.mj_resetData(m, datas[1])  # no contacts for a while
        if k == 25:
            mujoco.mj_copyData(datas[2], m, datas[0])
        for d in datas:
            mujoco.mj_step(m, d)
            mujoco.mj_step1(m, d)
        before = list(views._contact[1])
        ncon, geom, dpf = views.contacts()
        for i, d in enumerate(datas):
            c = d.contact
            assert ncon[i] == d.ncon == len(c.dist)
            np.testing.assert_array_equal(geom[i], c.geom)
            np.testing.assert_array_equal(dpf[i], np.concatenate([c.dist[:, None], c.pos, c.frame], axis=1))
            same = dpf[i] is before[i]
            reused += same
            changed += not same
            if ncon[i]:
                assert not dpf[i].flags.writeable and np.shares_memory(dpf[i], c.dist)  # a view, not a copy
    assert reused > 60 and changed >= 6, (reused, changed)


def test_batch_without_graph_arrays_has_the_same_contacts_and_lever_arms_of_its_step():
    """``build(..., graph=False)`` gives the contacts, Jacobian inputs and lever arms of ``graph=True`` (the lever
    arms from the step it was built at, read after the MjData moved on) and refuses its graph and velocities."""
    scene = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")
    m = scene.model
    datas = _kicked_batch(scene, 2, 0.3)
    set_contact_mode(m, scene, "external")
    for d in datas:
        mujoco.mj_step1(m, d)
    builder = GraphBuilder.from_scene(scene)
    full = builder.build(m, datas, dtype=torch.float64, dynamics=True)
    lean = builder.build(m, datas, dtype=torch.float64, dynamics=True, graph=False)
    r_obj, r_oth = full.r_obj.copy(), full.r_oth.copy()
    for d in datas:  # the MjData move on: the batch keeps its step's positions
        for _ in range(5):
            mujoco.mj_step(m, d)
    np.testing.assert_array_equal(lean.r_obj, r_obj)
    np.testing.assert_array_equal(lean.r_oth, r_oth)
    for f in ("env", "node", "normal", "dist"):
        np.testing.assert_array_equal(getattr(lean, f), getattr(full, f), err_msg=f)
    for a, b in zip(lean.dynamics, full.dynamics):
        np.testing.assert_array_equal(a, b)
    for f in ("graph", "vel", "omega"):
        with pytest.raises(ValueError, match="graph=False"):
            getattr(lean, f)


def test_constant_law_skips_the_graph_unless_its_inputs_are_checked():
    """The released constant law is stepped without the graph and says so (``stats()['inputs_checked']`` False);
    with ``check_inputs=True`` the graph is built, the inputs are checked and the forces are the same."""
    scene = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")
    m = scene.model
    model = load_checkpoint(release_checkpoint("rig_default"))[0]
    runs = {}
    for checked in (False, True):
        datas = _kicked_batch(scene, 2, 0.2)
        st = Stepper(scene, model, check_inputs=checked or None)
        assert needs_graph(st) is checked
        step(m, datas, st, nstep=5)
        assert st.stats()["inputs_checked"] is checked
        assert (st._last[0]._graph is not None) is checked
        runs[checked] = np.stack([np.concatenate([d.qpos, d.qvel]) for d in datas]), st.last_wrench
    np.testing.assert_array_equal(runs[False][0], runs[True][0])
    np.testing.assert_array_equal(runs[False][1], runs[True][1])
