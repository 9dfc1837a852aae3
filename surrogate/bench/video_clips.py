"""Clips: one MuJoCo scene and the trajectories (panels) a video shows side by side.

Trajectories come from the suites' own rollout functions, never a second implementation:
``cube_real.predict_analytic`` and ``predictors.surrogate_predict`` for free-object episodes
(tosses), ``replay.simulate_replay_qpos`` and ``replay.replay_with_model`` for grasps
(``rig-grasp``), ``policies.rollout`` for environment rollouts. Each panel carries its pose error
against the recording under the suites' one blow-up rule (``evaluate.episode_errors``), so a panel's
"episode mean" is the ledger's figure for that episode and model.

Shapes: F = recorded frames, P = panels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from .evaluate import episode_errors
from .video_select import dataset_path, find_episode, pick_episode, resolve_checkpoint


@dataclass
class Panel:
    """One trajectory of a clip.

    Attributes:
      label: what the panel shows, e.g. ``analytic (identified)``.
      kind: ``recorded`` | ``analytic`` | ``surrogate`` (sets the colour).
      qpos: [F, nq] the scene's ``qpos`` at the recorded frames.
      pos_pct: [F] position error, % of object size, against the recording (None: no recording,
        or this is the recording).
      rot_deg: [F] rotation error, deg (as ``pos_pct``).
      valid: [F] bool frames where the recording tracked the object.
      note: a short line under the label (e.g. the episode's mean error, an outcome).
    """

    label: str
    kind: str
    qpos: np.ndarray
    pos_pct: np.ndarray | None = None
    rot_deg: np.ndarray | None = None
    valid: np.ndarray | None = None
    note: str = ""

    def mean_pos_pct(self) -> float | None:
        """Mean position error over tracked frames, % of size (as the suites score an episode)."""
        if self.pos_pct is None:
            return None
        v = np.ones(len(self.pos_pct), bool) if self.valid is None else self.valid
        x = float(np.mean(self.pos_pct[v]))
        return x if np.isfinite(x) else None  # blew up with no blow-up rule in force (an env rollout)


@dataclass
class Clip:
    """A scene and the trajectories to show in it.

    Attributes:
      model: the MjModel every panel is drawn with (one scene; each panel sets its own qpos).
      object_qpos_adr: qpos address of the object's free joint (7 values).
      object_size: m, the object's size (errors are relative to it; sets the camera and trace width).
      times: [F] s since the first frame.
      panels: P panels, left to right.
      title: the header line.
      info: plain data about the clip (episode key, which, ledger figure, paths) for callers and reports.
    """

    model: object
    object_qpos_adr: int
    object_size: float
    times: np.ndarray
    panels: list
    title: str
    info: dict = field(default_factory=dict)


def _pose_panel(label, kind, pose, ep, scene_qpos0, adr, max_error_m=None):
    """A panel from a predicted [F, 7] object pose (free-object scene: the rest of qpos fixed)."""
    F = ep.num_frames
    q = np.tile(scene_qpos0, (F, 1))
    q[:, adr:adr + 7] = pose[:F]
    return _qpos_panel(label, kind, q, ep, adr, max_error_m)


def _qpos_panel(label, kind, qpos, ep, adr, max_error_m=None):
    """A panel from [F, nq] scene qpos, with its per-frame pose error against the recording (the suite's
    blow-up rule, ``max_error_m``: the ledger config's ``metrics.max_error_m``)."""
    F = min(len(qpos), ep.num_frames)
    qpos = np.asarray(qpos[:F], float)
    if kind == "recorded":
        return Panel(label, kind, qpos)
    e = episode_errors(qpos[:, adr:adr + 7], ep, max_error_m)
    p = Panel(label, kind, qpos, pos_pct=e["pos_m"] / ep.object.size * 100.0, rot_deg=e["rot_deg"], valid=e["valid"])
    mean = p.mean_pos_pct()
    blew = "" if e["blew_up_at"] is None else f"; blew up at {float(ep.timestamps[e['blew_up_at']] - ep.timestamps[0]):.2f} s"
    p.note = ("episode mean: blew up" if mean is None else
              f"episode mean {mean:.1f} % of size, {float(np.mean(p.rot_deg[p.valid])):.1f} deg{blew}")
    return p


def _analytic_params(ledger: dict, ep, which: str):
    """(AnalyticParams, label) of the analytic panel: the ledger's identified values, else nominal."""
    from .analytic import AnalyticParams, nominal_params

    ident = (ledger.get("models") or {}).get("analytic_identified") or {}
    if which == "identified" and "params" in ident:
        return AnalyticParams.from_json(ident["params"]), "analytic (identified)"
    if which not in ("identified", "nominal"):
        raise ConfigError(f"--analytic must be identified or nominal, got {which!r}", key="analytic")
    nom = ((ledger.get("config") or {}).get("baselines") or {}).get("nominal")
    if nom is None:
        raise ConfigError("the suite config has no baselines.nominal", key="config.baselines.nominal")
    return nominal_params(ep, nom), "analytic (nominal)"


def benchmark_clip(ledger: dict, *, episode: str | None = None, which: str | None = None, analytic: str = "identified",
                   checkpoint=None, ledger_file: Path | None = None, progress: bool = False) -> Clip:
    """The clip of one benchmark episode: recorded / analytic / surrogate.

    Args:
      ledger: a ``cube-real`` or ``rig-grasp`` ledger (``load_ledger``), or the minimal one
        ``suite_ledger`` builds from a suite config.
      episode / which: the episode's id (``SET/ID`` or a unique ``ID`` for ``rig-grasp``) or
        ``median`` / ``worst`` (``pick_episode``).
      analytic: ``identified`` (the ledger's identified parameters; nominal when the ledger has
        none) or ``nominal``.
      checkpoint: the surrogate's checkpoint (default: the ledger's ``models.surrogate.checkpoint``;
        no surrogate panel when neither is there).
    """
    suite = ledger.get("suite")
    if suite not in ("cube-real", "rig-grasp"):
        raise ConfigError(f"suite {suite!r} has no recorded episodes to render; use --env for rollouts", key="suite")
    if episode is not None and which is None and not ledger.get("models"):
        pick = {"key": str(episode), "which": None, "model": None, "pos_pct_size": None}
    else:
        pick = pick_episode(ledger, episode=episode, which=which)
    root, eid = dataset_path(ledger, pick["key"], ledger_file)
    ep, meta = find_episode(root, eid, ledger_file, "data.path")
    sur = (ledger.get("models") or {}).get("surrogate") or {}
    ckpt = None
    if checkpoint is not None:
        ckpt = resolve_checkpoint(checkpoint)
    elif sur.get("checkpoint"):
        ckpt = resolve_checkpoint(sur["checkpoint"], ledger_file=ledger_file)
    params, a_label = _analytic_params(ledger, ep, analytic)
    cfg = ledger.get("config") or {}
    sim = cfg.get("simulation") or {}
    cap = (cfg.get("metrics") or {}).get("max_error_m")
    if suite == "cube-real":
        clip = _toss_clip(ep, params, a_label, ckpt, sim, progress=progress, max_error_m=cap)
    else:
        delay = float((ledger.get("command_delay") or {}).get("delay_s", 0.0))  # the surrogate's hand, as scored
        clip = _grasp_clip(ep, meta, params, a_label, ckpt, sim, max_error_m=cap, delay_s=delay)
    name = ledger.get("suite_name") or suite
    what = {"median": "median", "worst": "worst"}.get(pick["which"] or "", "")
    rank = f" ({what} {'surrogate' if pick['model'] == 'surrogate' else (pick['model'] or '')} error)" if what else ""
    clip.title = f"{name}: episode {pick['key']}{rank}"
    clip.info = {"suite": suite, "suite_name": name, "episode": pick["key"], "which": pick["which"],
                 "ranked_by": pick["model"], "ledger_pos_pct_size": pick["pos_pct_size"],
                 "checkpoint": None if ckpt is None else str(ckpt), "analytic": a_label,
                 "panels": {p.label: p.mean_pos_pct() for p in clip.panels if p.pos_pct is not None},
                 "notes": {p.label: p.note for p in clip.panels if p.note}}  # the labels drawn under each panel
    return clip


def _toss_clip(ep, params, a_label, ckpt, sim, *, progress, max_error_m=None) -> Clip:
    from .cube_real import predict_analytic
    from .predictors import object_scene, surrogate_predict

    substeps, k = int(sim.get("substeps", 4)), int(sim.get("init_frames", 5))
    scene = object_scene(ep, substeps=substeps, mode="analytic")
    adr, q0 = scene.object_qpos_adr, scene.model.qpos0.copy()
    panels = [_pose_panel("recorded", "recorded", ep.object_pose, ep, q0, adr)]
    pred = predict_analytic([params], [ep], substeps=substeps, init_frames=k)[0][ep.episode_id]
    panels.append(_pose_panel(a_label, "analytic", pred, ep, q0, adr, max_error_m))
    if ckpt is not None:
        sp, _ = surrogate_predict(ckpt, [ep], substeps=substeps, init_frames=k, progress=progress)
        panels.append(_pose_panel("surrogate", "surrogate", sp[ep.episode_id], ep, q0, adr, max_error_m))
    return Clip(scene.model, adr, float(ep.object.size), ep.timestamps - ep.timestamps[0], panels, "")


def _grasp_clip(ep, meta, params, a_label, ckpt, sim, *, max_error_m=None, delay_s: float = 0.0) -> Clip:
    from .replay import prepare_replay, replay_with_model, simulate_replay_qpos
    from .rig_scoring import recorded_qpos

    substeps, margin = int(sim.get("substeps", 4)), float(sim.get("margin", 0.005))
    r = prepare_replay(ep, meta, substeps=substeps, margin=margin)
    adr = r.scene.object_qpos_adr
    panels = [_qpos_panel("recorded", "recorded", recorded_qpos(r), ep, adr),
              _qpos_panel(a_label, "analytic", simulate_replay_qpos(r, [params])[0], ep, adr, max_error_m)]
    if ckpt is not None:
        from ..model.checkpoint import load_checkpoint

        model, card = load_checkpoint(ckpt)
        _, q, _, _ = replay_with_model(ep, meta, model, substeps=substeps,
                                       margin=float((card.get("data") or {}).get("margin_m", margin)), delay_s=delay_s)
        panels.append(_qpos_panel("surrogate", "surrogate", q, ep, adr, max_error_m))
    return Clip(r.scene.model, adr, float(ep.object.size), ep.timestamps - ep.timestamps[0], panels, "")


def outcome_note(res: dict, i: int = 0) -> str:
    """A panel's note for copy ``i`` of a ``policies.rollout`` result: its outcome and final rise."""
    out = "held" if res["success"][i] else ("dropped" if res["dropped"][i] else
                                           ("lifted" if res["lifted"][i] else "not lifted"))
    out += ", slipped" if res["slipped"][i] else ""
    return f"{out}; rise {res['final_rise_m'][i] * 100:.1f} cm"


def env_clip(env_id: str = "ContactSurrogate/GripperGrasp-v0", *, checkpoint=None, object="box",
             object_seed: int | None = None, seed: int = 0, duration: float = 3.0, contacts=("analytic", "surrogate")
             ) -> Clip:
    """Closed-loop rollouts of the scripted grasp policy in a Gymnasium environment, one panel per
    contact model (``policies.rollout``, the policy suite's rollout; one copy, seeded ``seed``).

    ``object``: a procedural family name (with ``object_seed``, default 0) or an ``ObjectAsset`` (no ``object_seed``:
    the environment refuses one it would ignore)."""
    from ..envs import ENV_IDS, GraspVectorEnv
    from ..policies import GraspParams, ScriptedGraspPolicy, rollout

    obj_name = getattr(object, "name", None) or f"{object} (seed {object_seed or 0})"
    bare = env_id.split(":", 1)[-1]
    if bare not in ENV_IDS:
        raise ConfigError(f"unknown environment {env_id!r}; known: {sorted(ENV_IDS)}", key="env")
    if "surrogate" in contacts and checkpoint is None:
        raise ConfigError("an environment rollout with the surrogate needs --checkpoint", key="checkpoint")
    model = None
    if checkpoint is not None:
        from ..model.checkpoint import load_checkpoint

        model, _ = load_checkpoint(resolve_checkpoint(checkpoint))
    panels, clip_model, adr, size, dt = [], None, 0, 0.05, 0.02
    for contact in contacts:
        venv = GraspVectorEnv(1, copies=False, hand=ENV_IDS[bare], object=object, contact=contact,
                              object_seed=None if object_seed is None else int(object_seed),
                              contact_model=model if contact == "surrogate" else None, max_episode_steps=None)
        try:
            rec = []
            res = rollout(venv, ScriptedGraspPolicy(venv.task, GraspParams()), seed=int(seed), duration=float(duration),
                          record=rec)
            task = venv.task
            clip_model, adr, dt = task.model, task.scene.object_qpos_adr, task.control_dt
            size = float(max(task.scene.obj.extents))
            panels.append(Panel(f"{contact}", contact, np.stack([r[0] for r in rec]), note=outcome_note(res)))
        finally:
            venv.close()
    F = min(len(p.qpos) for p in panels)
    for p in panels:
        p.qpos = p.qpos[:F]
    clip = Clip(clip_model, adr, size, np.arange(F) * dt, panels, f"{bare}: {obj_name}, scripted grasp, env seed {seed}")
    clip.info = {"env": bare, "object": obj_name, "seed": int(seed),
                 "checkpoint": None if checkpoint is None else str(checkpoint),
                 "outcomes": {p.label: p.note for p in panels}}
    return clip
