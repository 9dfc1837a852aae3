"""The hybrid stepper on an articulated object (the two-link elbow): the oracles of tests/test_stepper.py.

(a) a contact model that returns no force == MuJoCo with the owned pairs excluded, exactly;
(b) MuJoCo's own analytic forces, through the stepper's path (per-link orientation, ``J^T F`` with each link's
    dofs: ``sim.link_graph``), reproduce ``mj_step`` over a toss in which both links hit the floor.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from surrogate.objects.articulated import load_articulation
from surrogate.scenes import build_scene, set_contact_mode
from surrogate.sim import MuJoCoContact, Stepper, ZeroContact, step

from .conftest import SHARED, trajectory

URDF = SHARED / "contactnets_elbow" / "contactnets_elbow.urdf"
pytestmark = pytest.mark.skipif(not URDF.exists(), reason=f"sample data {URDF} is absent (set SURROGATE_DATA)")


def _scene():
    s = build_scene(load_articulation(URDF).asset(), setting="ground", timestep=1 / 148 / 4, owned_margin=0.02,
                    contact_mode="external")
    return s


def _data(s):
    """A toss: 12 cm up, tilted, spinning, the hinge opening."""
    d = s.make_data(drop_height=0.12)
    d.qpos[3:7] = [np.cos(0.3), np.sin(0.3) * 0.6, np.sin(0.3) * 0.8, 0.0]
    d.qpos[7] = 0.8
    d.qvel[:6] = [0.4, -0.2, 0.3, 3.0, -2.0, 4.0]
    d.qvel[6] = -5.0
    mujoco.mj_forward(s.model, d)
    return d


def _run(s, stepper, n):
    """[n, nq + nv] the toss of ``_data`` under the stepper (plain ``mj_step`` without one)."""
    return trajectory(s.model, [_data(s)], n, stepper)[:, 0]


def test_zero_contact_equals_external_mode_exactly():
    s = _scene()
    hyb = _run(s, Stepper(s, ZeroContact()), 400)
    set_contact_mode(s.model, s, "external")
    ref = _run(s, None, 400)
    assert np.array_equal(hyb, ref)
    assert ref[-1, 2] < -0.05  # it fell through the floor


def test_mujoco_contact_reproduces_mj_step_on_both_links():
    s = _scene()
    n = 600  # 1 s: falls, hits the floor with both links, settles
    links = s.meta["object_link_bodies"]
    for tol, atol in ((1e-8, 1e-4), (0.0, 1e-9)):
        s.model.opt.tolerance = tol
        stepper = Stepper(s, MuJoCoContact(s))
        hyb = _run(s, stepper, n)
        set_contact_mode(s.model, s, "analytic")
        ref = _run(s, None, n)
        err = np.abs(hyb - ref)
        print(f"tolerance {tol:g}: largest qpos difference {err[:, :8].max():.3g}, qvel {err[:, 8:].max():.3g}")
        assert err[:, :8].max() < atol, (tol, err[:, :8].max())
    # both links touched the floor (their geoms were on the object side of owned contacts), and it came to rest
    d = _data(s)
    seen = set()
    set_contact_mode(s.model, s, "analytic")
    for _ in range(n):
        mujoco.mj_step(s.model, d)
        seen |= {int(s.model.geom_bodyid[g]) for g in d.contact.geom[:d.ncon].ravel()}
    assert set(links) <= seen
    assert 0.02 < ref[-1, 2] < 0.06  # on the floor, not through it


def test_cube_release_law_settles_the_elbow_on_both_links():
    """The released cube law (a constant law) owning both links' floor contacts: a dropped elbow comes to rest flat,
    both links on the floor at a small penetration, no fallback."""
    from pathlib import Path

    from surrogate.model.checkpoint import load_checkpoint

    ckpt = Path(__file__).resolve().parents[1] / "checkpoints" / "cube_tosses"
    s = _scene()
    stepper = Stepper(s, load_checkpoint(ckpt)[0], on_bad_force="raise")
    d = s.make_data(drop_height=0.08)
    d.qpos[7] = 0.4
    for _ in range(148 * 4 * 2):
        step(s.model, d, stepper)
    assert np.abs(d.qvel).max() < 0.02
    assert abs(d.qpos[7]) < 0.05  # the hinge fell flat
    for g in s.object_geom_ids:  # each link's box centre about half its 50 mm height up (measured 0.2 mm lower)
        assert d.geom_xpos[g][2] == pytest.approx(0.025, abs=1e-3)
    assert stepper.stats()["fallbacks"] == 0 and stepper.stats()["contacts"] > 0
