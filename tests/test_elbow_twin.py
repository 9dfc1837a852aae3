"""The differentiable twin of an articulated object (``sim.twin_links``) on the two-link elbow.

(a) values: with the same law the twin and the hybrid stepper produce the same toss (impacts on both links, friction
    re-linearized, a constant law through the stepper's compiled step, a network through its numpy path, torsional
    and rolling friction, the presliding spring and a network with contact history carried across steps);
(b) gradients through the joint: in free flight they equal finite differences of the whole rollout; at a contact step
    they do in every velocity and joint-angle column, and within the stated tolerance in height (the contact points'
    motion is left out); the law's parameters get gradients with the sign of finite differences over a window.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from surrogate.errors import ConfigError
from surrogate.model.contact_law import ContactLawGNN
from surrogate.objects.articulated import load_articulation
from surrogate.scenes import build_scene
from surrogate.sim import Stepper, step
from surrogate.sim.twin import Twin

from .conftest import SHARED
from .test_contact_law import CUBE, STRIBECK, _perturbed
from .test_elbow_stepper import _data as _toss  # its toss: 12 cm up, tilted, spinning, the hinge opening
from .test_history import SPRING_CUBE

URDF = SHARED / "contactnets_elbow" / "contactnets_elbow.urdf"
pytestmark = pytest.mark.skipif(not URDF.exists(), reason=f"sample data {URDF} is absent (set SURROGATE_DATA)")

FIRST_CONTACT = 107  # physics step of the toss below at which the first link touches the floor


@pytest.fixture(scope="module")
def scene():
    return build_scene(load_articulation(URDF).asset(), setting="ground", timestep=1 / 148 / 4, owned_margin=0.02,
                       contact_mode="external")


def _state(d) -> torch.Tensor:
    """[1, 15] the twin's state of the elbow: base pose and twist, hinge angle, hinge rate."""
    return torch.tensor(np.r_[d.qpos[:7], d.qvel[:6], d.qpos[7:8], d.qvel[6:7]])[None]


def _law(kind: str) -> ContactLawGNN:
    if kind == "constant":
        return ContactLawGNN(prior=STRIBECK, corrections=False, friction_iterations=4, stribeck=True).eval()
    if kind == "torsion":  # torsional and rolling friction with the presliding spring: the per-contact state
        prior = dict(SPRING_CUBE, torsional_friction=0.02, rolling_friction=0.01)
        return ContactLawGNN(prior=prior, corrections=False, friction_iterations=2).eval()
    if kind == "patch":  # each link's floor points as one patch, friction and torsion on one limit (law.patch_law)
        return ContactLawGNN(prior=dict(CUBE, torsional_friction=0.02), corrections=False, friction_iterations=2,
                             friction_ellipse=True).eval()
    if kind == "history":  # a network that sees each contact's history, matched across steps
        return _perturbed(ContactLawGNN(prior=SPRING_CUBE, corrections=True, friction_iterations=1, history=True), 0.5)
    return _perturbed(ContactLawGNN(prior=CUBE, corrections=True, friction_iterations=1), scale=0.5)


@pytest.mark.parametrize("kind", ["constant", "network", "torsion", "patch", "history"])
def test_twin_matches_the_hybrid_stepper_on_an_articulated_toss(scene, kind, torch_network):
    model = _law(kind)
    frames = 100  # 0.68 s: falls, both links hit the floor, bounce and slide
    stepper = Stepper(scene, model)
    d = _toss(scene)
    ref = []
    for _ in range(frames):
        ref.append(d.qpos.copy())
        step(scene.model, [d], stepper, nstep=4)
    ref = np.array(ref)
    assert stepper.stats()["contacts"] > 100
    with torch.no_grad():
        pos, quat, hinge = Twin(scene).rollout(model, _state(_toss(scene)), frames, substeps=4)
    np.testing.assert_allclose(pos[0].numpy(), ref[:, :3], atol=1e-9)
    np.testing.assert_allclose(quat[0].numpy(), ref[:, 3:7], atol=1e-9)
    np.testing.assert_allclose(hinge[0, :, 0].numpy(), ref[:, 7], atol=1e-9)


def _jacobian(f, x: torch.Tensor, cols: list[int], h: float = 1e-7) -> tuple[np.ndarray, np.ndarray]:
    """(autograd, centred finite differences) of ``f`` [k] in the columns ``cols`` of ``x`` [1, 15]."""
    ad = torch.autograd.functional.jacobian(f, x)[:, 0, cols].numpy()
    fd = []
    for c in cols:
        e = torch.zeros_like(x)
        e[0, c] = h
        with torch.no_grad():
            fd.append(((f(x + e) - f(x - e)) / (2 * h)).numpy())
    return ad, np.array(fd).T


def test_free_flight_gradients_through_the_joint_equal_finite_differences(scene):
    model = _law("constant")
    tw = Twin(scene)

    def final(x):  # the base position and the hinge angle after 20 frames, before any contact
        pos, _, hinge = tw.rollout(model, x, 20, substeps=4)
        return torch.cat([pos[0, -1], hinge[0, -1]])

    cols = [2, 7, 9, 10, 11, 12, 13, 14]  # height, base velocity and spin, hinge angle and rate
    ad, fd = _jacobian(final, _state(_toss(scene)), cols)
    np.testing.assert_allclose(ad, fd, rtol=1e-5, atol=1e-8)
    assert abs(ad[:3, -2:]).max() > 1e-3  # the hinge moves the base (through the joint): not a trivial zero


def test_contact_step_gradients_follow_finite_differences(scene):
    model = _law("constant")
    stepper = Stepper(scene, model)
    d = _toss(scene)
    step(scene.model, [d], stepper, nstep=FIRST_CONTACT + 1)
    tw, dt = Twin(scene), scene.model.opt.timestep
    x0 = _state(d)

    def velocity(x):  # one physics step: the base's linear velocity and the hinge rate after it
        pos, _, hinge = tw.rollout(model, x, 2, substeps=1)
        return torch.cat([pos[0, -1] - x[0, :3], hinge[0, -1] - x[0, 13:14]]) / dt

    exact = [7, 8, 9, 10, 11, 12, 13, 14]  # every velocity, the hinge angle (through M(q)) and rate
    ad, fd = _jacobian(velocity, x0, exact + [2])
    assert abs(fd[3, exact.index(13)]) > 0.1  # the hinge angle changes how the contact moves the hinge
    np.testing.assert_allclose(ad[:, :-1], fd[:, :-1], rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(ad[:, -1], fd[:, -1], rtol=0.1)  # height: the contact points' motion left out

    def window(m):  # a loss of the base and the hinge 5 frames (20 steps) into the first impact
        pos, quat, hinge = tw.rollout(m, x0, 5, substeps=4)
        return pos[0, -1, 2] + quat[0, -1, 1] + 0.1 * hinge[0, -1, 0]

    for name in ("log_stiffness", "log_damping", "log_friction"):
        p = getattr(model, name)
        p.grad = None
        window(model).backward()
        g = float(p.grad[0])
        with torch.no_grad():
            p[0] += 1e-4
            up = float(window(model))
            p[0] -= 2e-4
            down = float(window(model))
            p[0] += 1e-4
        fd_g = (up - down) / 2e-4
        assert np.isfinite(g) and abs(g - fd_g) < 0.25 * abs(fd_g), (name, g, fd_g)


def test_an_articulated_state_of_the_wrong_width_is_refused(scene):
    with pytest.raises(ConfigError, match="13 \\+ 2J"):
        Twin(scene).rollout(_law("constant"), torch.zeros(1, 13, dtype=torch.float64), 3, substeps=4)


def test_a_joint_the_twin_cannot_step_like_mujoco_is_refused_by_name(scene):
    import copy

    m = copy.copy(scene.model)
    m.jnt_limited[1] = 1  # the hinge, limited: MuJoCo would add a constraint the joint-space solve does not see
    with pytest.raises(ConfigError, match="hinge_1_to_2.*limited"):
        Twin(scene, model=m).rollout(_law("constant"), _state(_toss(scene)), 3, substeps=4)


def test_with_gradients_on_the_values_are_the_same(scene):
    """The finite differences that carry the configuration's first order leave every value as without gradients."""
    model, x = _law("network"), _state(_toss(scene))
    with torch.no_grad():
        ref = Twin(scene).rollout(model, x, 40, substeps=4)
    out = Twin(scene).rollout(model, x.clone().requires_grad_(True), 40, substeps=4)
    for a, b in zip(out, ref):
        np.testing.assert_allclose(a.detach().numpy(), b.numpy(), rtol=0, atol=1e-12)


def test_surrogate_train_fits_the_law_on_articulated_tosses(tmp_path, monkeypatch):
    """``surrogate train`` on the elbow's captures: one window per toss from its first-state estimate (base pose,
    hinge angle and rate), rolled out by the articulated twin; the floor law moves, the export loads and the stepper
    runs it on the elbow."""
    from surrogate.cli import main
    from surrogate.model.checkpoint import load_checkpoint

    src = tmp_path / "raw"
    src.mkdir()
    for n in ("0", "9", "18", "27", "36"):
        shutil.copy(URDF.parent / f"{n}.pt", src / f"{n}.pt")
    assert main(["import", "contactnets", str(src), "--urdf", str(URDF), "--out", str(tmp_path / "elbow"),
                 "--quiet"]) == 0
    monkeypatch.chdir(tmp_path)
    sets = ["data.root=elbow", "data.bench_split=null", "data.val_min=0", "data.max_train_episodes=3",
            "data.max_val_episodes=2", "data.window_frames=30", "model.corrections=false", "stages.prior.epochs=1",
            "trainer.log_every_n_steps=1", "trainer.enable_progress_bar=false", "out_dir=run"]
    assert main(["train", "-c", "cube_tosses", *[a for s in sets for a in ("--set", s)]]) == 0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    rows = (tmp_path / "run" / "csv_prior" / "version_0" / "metrics.csv").read_text().splitlines()
    head = rows[0].split(",")
    epoch = [dict(zip(head, r.split(","))) for r in rows[1:]]
    losses = [float(r["train/pose_loss"]) for r in epoch if r.get("train/pose_loss")]
    scores = [float(r["val_score"]) for r in epoch if r.get("val_score")]
    assert losses and all(np.isfinite(losses))  # link 1's pose loss over the twin's articulated rollouts
    # the epoch's law scores differently from the release's law it started at: the gradient reached the floor law
    assert scores and scores[0] != pytest.approx(result["prior"]["initial"]["score"], rel=1e-9)
    assert result["prior"]["fitted"]["score"] <= result["prior"]["initial"]["score"]  # the better one is kept
    model, card = load_checkpoint(tmp_path / "run" / "export")
    assert card["model"]["hparams"]["prior"] == pytest.approx(result["prior"]["law"]["surface"])
    scene = build_scene(load_articulation(URDF).asset(), setting="ground", timestep=1 / 148 / 4, owned_margin=0.02,
                        contact_mode="external")
    stepper = Stepper(scene, model)
    d = _toss(scene)
    step(scene.model, [d], stepper, nstep=600)
    assert stepper.stats()["contacts"] > 0 and 0.02 < d.qpos[2] < 0.06  # landed on the floor, not through it

