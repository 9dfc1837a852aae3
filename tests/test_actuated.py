"""Training through the hybrid stepper's own step with the hand actuated (``data.hand: actuated``,
``learn.actuated``): the torch joint solve against the stepper's numpy one, the rollout's values against the
stepper's closed loop, its gradients, and a real fit."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from surrogate.errors import ConfigError
from surrogate.learn.actuated import _resolve, _start, actuated_rollout, episode_scene
from surrogate.learn.episodes import load_capture
from surrogate.learn.lightning import RolloutData, validate_chunk
from surrogate.learn.objective import episode_scores, stack_forces
from surrogate.learn.windows import episode_windows
from surrogate.model.checkpoint import load_checkpoint
from surrogate.model.contact_law import ContactLawGNN
from surrogate.rig.generate import generate
from surrogate.sim import Stepper, step
from surrogate.sim.law_solve import solve_law
from surrogate.training.config import load_config
from surrogate.training.run import fit

from .conftest import eval_script
from .test_training_selection import RELEASE

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def grasps(tmp_path_factory):
    out = tmp_path_factory.mktemp("rig") / "ds"
    generate(None, objects="train", episodes=4, out=out, workers=0, seed=3, progress=False, duration=2.0)
    return out


def _network(seed: int = 0) -> ContactLawGNN:
    """The release's law with a network whose corrections are far from zero (training mode)."""
    law, _ = load_checkpoint(RELEASE)
    model = ContactLawGNN(**{**law.hparams, "corrections": True, "hidden": 8, "steps": 1})
    model.load_state_dict(law.state_dict(), strict=False)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.correction_parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return model.train()


@pytest.mark.parametrize("iterations, spring", [(0, False), (2, True)])
def test_a_batch_of_environments_solves_as_each_environment_alone(iterations, spring):
    """Environments of 1, 3 and 5 contacts in one batched solve, friction re-linearized or not, with a spring's
    damping: each environment's forces and velocity are those of its own solve, to 1e-12 (relative)."""
    rng = np.random.default_rng(iterations)
    counts = np.array([1, 3, 5])
    E, B, nv = int(counts.sum()), len(counts), 9
    n = rng.normal(size=(E, 3))
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    L = rng.normal(size=(B, nv, nv))
    M = L @ L.transpose(0, 2, 1) + nv * np.eye(nv)
    J, w0, qv = rng.normal(size=(E, 3, nv)), rng.normal(size=(E, 3)), rng.normal(size=(B, nv))
    a, b = rng.uniform(1, 50, E), rng.uniform(10, 500, E)
    mu, eps = rng.uniform(0.2, 1.0, E), np.full(E, 1e-3)
    a_z = rng.uniform(0, 5, E) if spring else None
    F, v1 = solve_law(w0, a, b, n, J, counts, M, qv, 0.002, mu=mu, eps=eps, iterations=iterations, a_spring=a_z)
    for i, s in enumerate(np.cumsum(counts) - counts):
        r = slice(s, s + counts[i])
        Fi, vi = solve_law(w0[r], a[r], b[r], n[r], J[r], counts[i:i + 1], M[i:i + 1], qv[i:i + 1], 0.002, mu=mu[r],
                           eps=eps[r], iterations=iterations, a_spring=None if a_z is None else a_z[r])
        np.testing.assert_allclose(F[r], Fi, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(v1[i:i + 1], vi, rtol=1e-12, atol=1e-12)


def test_actuated_rollout_is_the_stepper_closed_loop_with_gradients(grasps):
    """Two episodes' windows (each episode its own scene and grip force): the rollout's poses are the hybrid
    stepper's with the hand on its servos, bit for bit; each taped step solved again in torch gives the stepper's
    forces; the gradients of the poses and pad forces reach the network and the law's friction, finite."""
    cap = load_capture(grasps)
    model = _network()
    scenes, wins = [], []
    for e in cap.episodes[:2]:
        sc = episode_scene(e, cap.meta, margin=0.005, substeps=4)
        ws = episode_windows(e, cap.meta, sc, frames=40, stride=60, substeps=4, with_force=True)
        wins += ws
        scenes += [sc] * len(ws)
    assert len({id(s) for s in scenes}) == 2 and all(w.ctrl is not None and w.ctrl.shape[0] == 160 for w in wins)
    fb = stack_forces(wins, 41)
    pos, quat, pads = actuated_rollout(model, scenes, wins, 41, substeps=4, force_bodies=fb[0])
    k = sum(s is scenes[0] for s in scenes)
    stepper = Stepper(scenes[0], model, on_bad_force="raise", check_inputs=False)
    stepper.tape = []
    ds = [_start(scenes[0], w) for w in wins[:k]]
    a = scenes[0].object_qpos_adr
    solved = 0
    for s in range(160):
        for w, d in zip(wins, ds):
            d.ctrl[:] = w.ctrl[s]
        stepper.tape.clear()
        step(scenes[0].model, ds, stepper)
        for rec in stepper.tape:
            zero = torch.zeros(k, scenes[0].model.nv, dtype=torch.float64)
            _, forces = _resolve(model, rec, zero, zero, zero, torch.arange(k), scenes[0].model.opt.timestep)
            rows = slice(None) if rec.rows is None else rec.rows
            np.testing.assert_allclose(forces.detach().numpy()[rows], rec.F, rtol=1e-8, atol=1e-9)
            solved += 1
    assert solved > 20
    np.testing.assert_array_equal(pos[:k, -1].detach().numpy(), np.array([d.qpos[a:a + 3] for d in ds]))
    assert float(pads.detach().abs().max()) > 0.05  # the grip is on in some window
    (pos[:, -1].sum() + quat[:, -1, 1:].sum() + 1e-2 * pads.sum()).backward()
    grads = [p.grad for p in model.correction_parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads) and sum(float(g.abs().sum()) for g in grads) > 0
    assert float(model.log_friction.grad.abs().sum()) > 0


def _closed_loop(scene, ep, dm):
    """A function of a model: the episode's object poses [T, 7] stepped by the hybrid stepper from its whole-episode
    window's first state with the hand on its recorded commands (what actuated validation must score)."""
    w = episode_windows(ep, dm.capture.meta, scene, frames=0, stride=0, substeps=4, init_frames=dm.cfg["init_frames"])[0]
    a = scene.object_qpos_adr

    def run(model):
        stepper = Stepper(scene, model, on_bad_force="fallback", check_inputs=False)
        d = _start(scene, w)
        out = [d.qpos[a:a + 7].copy()]
        for s in range(len(w.ctrl)):
            d.ctrl[:] = w.ctrl[s]
            step(scene.model, [d], stepper)
            if (s + 1) % 4 == 0:
                out.append(d.qpos[a:a + 7].copy())
        return np.array(out)

    return run


def test_actuated_training_fits_on_whole_episode_batches(grasps, tmp_path):
    """``data.hand: actuated`` trains the network through the stepper (whole episodes per batch, each with its own
    scene) and exports; an unknown ``data.hand`` is refused by name."""
    base = [f"data.root={grasps}", "data.val_fraction=0.5", "data.val_min=0", "data.window_frames=24",
            "data.window_stride=60", "model.hidden=8", "model.steps=1", "trainer.enable_progress_bar=false",
            f"out_dir={tmp_path / 'run'}", f"export.dir={tmp_path / 'run' / 'export'}", "stages.prior.epochs=0",
            "stages.corrections.epochs=2", "stages.closed_loop.episodes=2", "stages.closed_loop.friction_scales=[1.0]"]
    cfg = load_config("rig_default", [*base, "data.hand=actuated"])
    dm = RolloutData(**cfg["data"])
    dm.setup()
    items = dm.train_items(1)
    for b in items:  # an episode's windows are never split across batches
        for e in {w.episode_id for w in b}:
            assert sum(w.episode_id == e for w in b) == sum(w.episode_id == e for w in dm.windows)
    assert set(dm.episode_scenes) == set(dm.train_ids) | set(dm.val_ids)
    # validation scores whole episodes in closed loop (the stepper, the hand on its servos), not through the twin
    chunk = dm.val_items[0]
    model = _network()
    eps = [e for _, e in chunk]
    closed = {e.episode_id: _closed_loop(dm.episode_scenes[e.episode_id], e, dm) for e in eps}
    actuated = validate_chunk(model, dm, chunk)  # closed-loop replays: computed once, compared three times
    assert actuated == episode_scores({k: closed[k](model) for k in closed}, eps)
    kin = RolloutData(**{**cfg["data"], "hand": "kinematic"})
    kin.setup()
    assert validate_chunk(model, kin, chunk) != actuated
    # kinematic training, actuated validation: the twin's windows, the closed-loop scores, scenes only for validation
    mixed = RolloutData(**{**cfg["data"], "hand": "kinematic", "val_hand": "actuated"})
    mixed.setup()
    ids = [[(w.episode_id, w.start) for w in b] for b in kin.train_items(1)]
    assert set(mixed.episode_scenes) == set(mixed.val_ids)
    assert [[(w.episode_id, w.start) for w in b] for b in mixed.train_items(1)] == ids
    assert validate_chunk(model, mixed, chunk) == actuated
    fit(cfg)
    card = json.loads((tmp_path / "run" / "export" / "card.json").read_text())
    hist = card["training"]["metrics"]["corrections"]["history"]
    assert len(hist) == 2 and all(np.isfinite(h["score"]) for h in hist)
    with pytest.raises(ConfigError, match="data.hand"):
        RolloutData(**{**cfg["data"], "hand": "puppet"})
    with pytest.raises(ConfigError, match="data.val_hand"):
        RolloutData(**{**cfg["data"], "val_hand": "puppet"})


def test_training_gradient_through_the_stepper_agrees_with_finite_differences(grasps):
    """``eval/gradient_check.py`` on the release's law: the gradient of training's window loss through the stepper
    (the hand on its servos) points where central finite differences of the same loss through the same stepper do
    (cosine over the six law parameters), and so does the twin's; the pads' friction, what a grasp turns on, has the
    finite difference's sign and size to a factor 4 (measured here: cosines 0.86 and 0.99). Carrying the hand's
    perturbations too, as the thirtieth session's training did, fails it: cosine 0.13 here, the pads' friction
    gradient -2e-6 against +0.018."""
    check = eval_script("gradient_check")
    cap = load_capture(grasps)
    law, _ = load_checkpoint(RELEASE)
    for hand in ("actuated", "kinematic"):
        loss, n = check.window_loss_fn(law, cap, cap.episodes, hand=hand, frames=40, stride=60)
        rows = check.gradient_check(loss, law, step=0.02)
        pads = next(r for r in rows if r["parameter"] == "log_friction[pads]")
        assert n >= 8 and check.cosine(rows) > 0.8, (hand, rows)
        assert 0.25 < pads["gradient"] / pads["finite_difference"] < 4.0, (hand, pads)
