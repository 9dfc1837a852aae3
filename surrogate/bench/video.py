"""Side-by-side videos of benchmark episodes and environment rollouts (``surrogate render``).

A *clip* is one MuJoCo scene shown once per trajectory, side by side: the recording, analytic
MuJoCo and the surrogate for a benchmark episode; analytic and surrogate for a closed-loop
environment rollout (there is no recording). Each panel is labelled with its model, the time and
its pose error against the recording at that frame (``surrogate.metrics.pose_errors``, the one pose
error); the object's trace, the path of its centre of mass so far, is drawn into the renderer's
scene as capsules (``mjv_initGeom`` / ``mjv_connector``): the panel's own path in its colour and,
in the model panels, the recorded path in white for reference.

Trajectories come from the suites' own rollout functions, never a second implementation:
``cube_real.predict_analytic`` and ``predictors.surrogate_predict`` for free-object episodes
(tosses), ``replay.simulate_replay_qpos`` and ``replay.surrogate_replay_qpos`` for grasps
(``rig-grasp``), ``policies.rollout`` for environment rollouts. The episode is named, or picked
as the ``median`` or ``worst`` of a ledger's per-episode position errors (the figure the suite
scored with ``pose_errors``: the surrogate's, or the identified baseline's when no surrogate was
evaluated; for ``rig-grasp`` among the acceptance sets' episodes).

Rendering is headless (``mujoco.Renderer``; set ``MUJOCO_GL=egl`` before MuJoCo is imported on a
machine without a display; the ``surrogate`` command does so itself). MP4 goes through imageio
with its ffmpeg (dependencies of the package); GIF and PNG need only Pillow. Every output is written
atomically with the user's umask.

Shapes: F = recorded frames, N = video frames, P = panels, H x W = one panel's pixels.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..atomic import atomic_file, write_bytes_atomic
from ..errors import CaptureError, ConfigError, SurrogateError
from ..metrics import pose_errors
from ..paths import REPO_ROOT

PANEL_RGBA = {"recorded": (0.20, 0.75, 0.30, 1.0), "analytic": (0.03, 0.32, 0.61, 1.0),
              "surrogate": (0.85, 0.28, 0.00, 1.0)}
REFERENCE_RGBA = (1.0, 1.0, 1.0, 0.55)  # the recorded path drawn in the model panels
HEADER_PX = 20  # title strip above the panels
WHICH = ("median", "worst")


class RenderError(SurrogateError):
    """Rendering or video writing is not possible here (no OpenGL context, no MP4 writer)."""


# ----------------------------------------------------------------------------- clips

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
        return x if np.isfinite(x) else None  # a rollout that blew up (the ledger caps it at max_error_m)


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


def _pose_panel(label, kind, pose, ep, scene_qpos0, adr):
    """A panel from a predicted [F, 7] object pose (free-object scene: the rest of qpos fixed)."""
    F = ep.num_frames
    q = np.tile(scene_qpos0, (F, 1))
    q[:, adr:adr + 7] = pose[:F]
    return _qpos_panel(label, kind, q, ep, adr)


def _qpos_panel(label, kind, qpos, ep, adr):
    """A panel from [F, nq] scene qpos, with its per-frame pose error against the recording."""
    F = min(len(qpos), ep.num_frames)
    qpos = np.asarray(qpos[:F], float)
    if kind == "recorded":
        return Panel(label, kind, qpos)
    valid = None if ep.object_pose_valid is None else np.asarray(ep.object_pose_valid[:F], bool)
    e = pose_errors(qpos[:, adr:adr + 7], ep.object_pose[:F], valid)
    p = Panel(label, kind, qpos, pos_pct=e["pos_m"] / ep.object.size * 100.0, rot_deg=e["rot_deg"], valid=e["valid"])
    mean = p.mean_pos_pct()
    p.note = ("episode mean: blew up" if mean is None else
              f"episode mean {mean:.1f} % of size, {float(np.mean(p.rot_deg[p.valid])):.1f} deg")
    return p


def load_ledger(path) -> tuple[dict, Path]:
    """A ledger (``ledger.json`` or the report folder holding it) and its file path."""
    p = Path(path)
    if p.is_dir():
        p = p / "ledger.json"
    if not p.is_file():
        raise ConfigError("no ledger here (give a ledger.json or the --out folder of `surrogate bench`)", file=p)
    try:
        return json.loads(p.read_text()), p
    except (OSError, ValueError) as e:
        raise ConfigError(f"not a readable ledger ({e})", file=p) from None


def ranking_model(ledger: dict) -> str | None:
    """The model whose per-episode errors pick ``median`` / ``worst``: the surrogate, else the
    identified baseline, else the nominal one (the first evaluated with per-episode pose errors)."""
    for name in ("surrogate", "analytic_identified", "analytic_nominal"):
        m = ledger.get("models", {}).get(name) or {}
        if m.get("per_episode") and "pos_pct_size" in m["per_episode"][0]:
            return name
    return None


def ranked_episodes(ledger: dict) -> tuple[str, list[tuple[str, float]]]:
    """(model, [(episode key, mean position error % of size)] sorted by error, ascending).

    Keys are the ledger's per-episode ids (``set/id`` for ``rig-grasp``); for ``rig-grasp`` only
    the acceptance sets' episodes take part (those the verdict is about), when the ledger names them.
    """
    name = ranking_model(ledger)
    if name is None:
        raise ConfigError(f"ledger of suite {ledger.get('suite')!r} has no per-episode pose errors to pick an episode from "
                          "(models.*.per_episode); the policy suite is rendered from environment rollouts", key="models")
    rows = ledger["models"][name]["per_episode"]
    target = set((ledger.get("split") or {}).get("target_sets") or [])
    if target and all("set" in r for r in rows):
        rows = [r for r in rows if r["set"] in target] or rows
    pairs = [(str(r["id"]), float(r["pos_pct_size"])) for r in rows if r.get("pos_pct_size") is not None]
    return name, sorted(pairs, key=lambda x: (x[1], x[0]))


def pick_episode(ledger: dict, *, episode: str | None = None, which: str | None = None) -> dict:
    """The episode to render: named (``episode``) or ``median`` / ``worst`` by ``ranked_episodes``.

    Returns {"key", "which", "model", "pos_pct_size"} (the ledger's figure for that model and episode).
    The median of an even count is the lower middle episode (an episode, not an average of two).
    """
    if (episode is None) == (which is None):
        raise ConfigError("give exactly one of --episode ID and --which median|worst", key="episode")
    model, ranked = ranked_episodes(ledger)
    if not ranked:
        raise ConfigError(f"models.{model}.per_episode is empty", key=f"models.{model}.per_episode")
    if which is not None:
        if which not in WHICH:
            raise ConfigError(f"--which must be one of {WHICH}, got {which!r}", key="which")
        key, val = ranked[(len(ranked) - 1) // 2] if which == "median" else ranked[-1]
        return {"key": key, "which": which, "model": model, "pos_pct_size": val}
    keys = {k: v for k, v in ranked}
    every = {str(r["id"]): r.get("pos_pct_size") for r in ledger["models"][model]["per_episode"]}
    cands = [k for k in every if k == str(episode) or k.split("/", 1)[-1] == str(episode)]
    if len(cands) != 1:
        shown = ", ".join(list(every)[:8]) + (" ..." if len(every) > 8 else "")
        why = "is ambiguous (name the test set: SET/ID)" if cands else "is not one of its test episodes"
        raise ConfigError(f"episode {episode!r} {why}; the ledger's episodes (models.{model}.per_episode): {shown}",
                          key="episode")
    key = cands[0]
    return {"key": key, "which": None, "model": model, "pos_pct_size": keys.get(key, every[key])}


def resolve_checkpoint(path, *, ledger_file: Path | None = None, field_name: str = "models.surrogate.checkpoint") -> Path:
    """A checkpoint folder named in a ledger or on the command line: as given, else under the
    repository (ledgers record the path as it was typed, often relative to the checkout)."""
    p = Path(str(path))
    for cand in (p, REPO_ROOT / p):
        if (cand / "card.json").is_file():
            return cand
    raise ConfigError(f"checkpoint {str(path)!r} not found as given or under {REPO_ROOT} (no card.json); "
                      "pass --checkpoint", file=ledger_file, key=field_name if ledger_file else "checkpoint")


def _dataset_path(ledger: dict, key: str, ledger_file) -> tuple[Path, str]:
    """(capture dataset holding the episode, its id within it) for a ledger episode key."""
    data = ledger.get("data") or {}
    if ledger.get("suite") == "rig-grasp":
        set_name, _, eid = key.partition("/")
        tds = (data.get("test_data") or {}).get(set_name) or {}
        if "path" not in tds:
            raise ConfigError(f"test set {set_name!r} of episode {key!r} has no path in the ledger", file=ledger_file,
                              key=f"data.test_data.{set_name}.path")
        return Path(tds["path"]), eid
    td = data.get("test_data")
    if isinstance(td, dict) and "path" in td:
        return Path(td["path"]), key
    if "path" not in data:
        raise ConfigError("the ledger names no dataset path", file=ledger_file, key="data.path")
    return Path(data["path"]), key


def _find_episode(root: Path, eid: str, ledger_file, field_name: str):
    from ..capture import read_dataset

    if not (root / "meta" / "contact.json").is_file():
        raise ConfigError(f"dataset {root} (of episode {eid!r}) not found: it was there when the suite ran; "
                          "rerun `surrogate bench` or restore it", file=ledger_file, key=field_name)
    ds = read_dataset(root)
    for e in ds.episodes:
        if str(e.episode_id) == eid:
            return e, ds.meta
    raise CaptureError("no such episode in this dataset (the ledger names it)", file=root, episode=eid, field="episode_id")


def _analytic_params(ledger: dict, ep, which: str):
    """(AnalyticParams, label) of the analytic panel: the ledger's identified values, else nominal."""
    from .analytic import AnalyticParams
    from .rig_grasp import _nominal

    ident = (ledger.get("models") or {}).get("analytic_identified") or {}
    if which == "identified" and "params" in ident:
        return AnalyticParams.from_json(ident["params"]), "analytic (identified)"
    if which not in ("identified", "nominal"):
        raise ConfigError(f"--analytic must be identified or nominal, got {which!r}", key="analytic")
    nom = ((ledger.get("config") or {}).get("baselines") or {}).get("nominal")
    if nom is None:
        raise ConfigError("the suite config has no baselines.nominal", key="config.baselines.nominal")
    return _nominal(ep, nom), "analytic (nominal)"


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
    root, eid = _dataset_path(ledger, pick["key"], ledger_file)
    ep, meta = _find_episode(root, eid, ledger_file, "data.path")
    sur = (ledger.get("models") or {}).get("surrogate") or {}
    ckpt = None
    if checkpoint is not None:
        ckpt = resolve_checkpoint(checkpoint)
    elif sur.get("checkpoint"):
        ckpt = resolve_checkpoint(sur["checkpoint"], ledger_file=ledger_file)
    params, a_label = _analytic_params(ledger, ep, analytic)
    cfg = ledger.get("config") or {}
    sim = cfg.get("simulation") or {}
    if suite == "cube-real":
        clip = _toss_clip(ep, params, a_label, ckpt, sim, progress=progress)
    else:
        clip = _grasp_clip(ep, meta, params, a_label, ckpt, sim)
    name = ledger.get("suite_name") or suite
    what = {"median": "median", "worst": "worst"}.get(pick["which"] or "", "")
    rank = f" ({what} {'surrogate' if pick['model'] == 'surrogate' else (pick['model'] or '')} error)" if what else ""
    clip.title = f"{name}: episode {pick['key']}{rank}"
    clip.info = {"suite": suite, "suite_name": name, "episode": pick["key"], "which": pick["which"],
                 "ranked_by": pick["model"], "ledger_pos_pct_size": pick["pos_pct_size"],
                 "checkpoint": None if ckpt is None else str(ckpt), "analytic": a_label,
                 "panels": {p.label: p.mean_pos_pct() for p in clip.panels if p.pos_pct is not None}}
    return clip


def _toss_clip(ep, params, a_label, ckpt, sim, *, progress) -> Clip:
    from .cube_real import predict_analytic
    from .predictors import object_scene, surrogate_predict

    substeps, k = int(sim.get("substeps", 4)), int(sim.get("init_frames", 5))
    scene = object_scene(ep, substeps=substeps, mode="analytic")
    adr, q0 = scene.object_qpos_adr, scene.model.qpos0.copy()
    panels = [_pose_panel("recorded", "recorded", ep.object_pose, ep, q0, adr)]
    pred = predict_analytic([params], [ep], substeps=substeps, init_frames=k)[0][ep.episode_id]
    panels.append(_pose_panel(a_label, "analytic", pred, ep, q0, adr))
    if ckpt is not None:
        sp, _ = surrogate_predict(ckpt, [ep], substeps=substeps, init_frames=k, progress=progress)
        panels.append(_pose_panel("surrogate", "surrogate", sp[ep.episode_id], ep, q0, adr))
    return Clip(scene.model, adr, float(ep.object.size), ep.timestamps - ep.timestamps[0], panels, "")


def _grasp_clip(ep, meta, params, a_label, ckpt, sim) -> Clip:
    from .replay import prepare_replay, replay_with_model, simulate_replay_qpos
    from .rig_grasp import _recorded_qpos

    substeps, margin = int(sim.get("substeps", 4)), float(sim.get("margin", 0.005))
    r = prepare_replay(ep, meta, substeps=substeps, margin=margin)
    adr = r.scene.object_qpos_adr
    panels = [_qpos_panel("recorded", "recorded", _recorded_qpos(r), ep, adr),
              _qpos_panel(a_label, "analytic", simulate_replay_qpos(r, [params])[0], ep, adr)]
    if ckpt is not None:
        from ..model.checkpoint import load_checkpoint

        model, card = load_checkpoint(ckpt)
        _, q, _, _ = replay_with_model(ep, meta, model, substeps=substeps,
                                       margin=float((card.get("data") or {}).get("margin_m", margin)))
        panels.append(_qpos_panel("surrogate", "surrogate", q, ep, adr))
    return Clip(r.scene.model, adr, float(ep.object.size), ep.timestamps - ep.timestamps[0], panels, "")


def suite_ledger(suite: str, *, overrides=(), test_data=None, cache_dir=None, progress: bool = False) -> dict:
    """A minimal ledger for rendering a named episode of a suite without running it: the suite's
    config and where its test episodes are (no models: the analytic panel is nominal)."""
    from .run import CACHE_DIR
    from ..suites import load_suite

    cfg = load_suite(suite, overrides)
    cache_dir = Path(cache_dir or CACHE_DIR)
    name = Path(suite).stem if str(suite).endswith((".yaml", ".yml")) else str(suite)
    out = {"suite": cfg["suite"], "suite_name": name, "config": cfg, "models": {}, "split": {}}
    if cfg["suite"] == "cube-real":
        if test_data is not None:
            out["data"] = {"path": str(test_data)}
        else:
            from .cube_real import load_episodes

            out["data"] = {"path": str(load_episodes(cfg["data"]["source"], cache_dir=cache_dir, progress=progress).root)}
    elif cfg["suite"] == "rig-grasp":
        from .rig_grasp import _load_sets

        rig = {"config": cfg["data"].get("rig_config"), "overrides": cfg["data"].get("rig_overrides", []),
               "hand": cfg["data"].get("hand", "parallel_jaw"), "duration": cfg["data"].get("duration")}
        sets, _ = _load_sets(cfg, test_data=test_data, rig=rig, cache_dir=cache_dir, workers=int(cfg.get("workers", 2)),
                             progress=progress)
        out["data"] = {"test_data": {n: {"path": str(ds.root)} for n, ds in sets.items()}}
        out["sets"] = {n: [str(e.episode_id) for e in ds.episodes] for n, ds in sets.items()}
    else:
        raise ConfigError(f"suite {suite!r} (kind {cfg['suite']!r}) has no recorded episodes; use --env", key="suite")
    return out


def suite_episode_key(ledger: dict, episode: str) -> str:
    """The ``SET/ID`` key of a bare ``rig-grasp`` episode id in a ``suite_ledger`` (ids are unique per set only)."""
    sets = ledger.get("sets")
    if not sets or "/" in str(episode):
        return str(episode)
    hits = [f"{n}/{episode}" for n, ids in sets.items() if str(episode) in ids]
    if len(hits) != 1:
        raise ConfigError(f"episode {episode!r} is {'in several test sets: ' + ', '.join(hits) if hits else 'in no test set'}"
                          f" of suite {ledger.get('suite_name')}; name it SET/ID", key="episode")
    return hits[0]


def env_clip(env_id: str = "ContactSurrogate/GripperGrasp-v0", *, checkpoint=None, object="box",
             object_seed: int = 0, seed: int = 0, duration: float = 3.0, contacts=("analytic", "surrogate")) -> Clip:
    """Closed-loop rollouts of the scripted grasp policy in a Gymnasium environment, one panel per
    contact model (``policies.rollout``, the policy suite's rollout; one copy, seeded ``seed``).

    ``object``: a procedural family name (with ``object_seed``) or an ``ObjectAsset``."""
    from ..envs import ENV_IDS, GraspVectorEnv
    from ..policies import GraspParams, ScriptedGraspPolicy, rollout

    obj_name = getattr(object, "name", None) or f"{object} (seed {object_seed})"
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
        venv = GraspVectorEnv(1, hand=ENV_IDS[bare], object=object, object_seed=int(object_seed), contact=contact,
                              contact_model=model if contact == "surrogate" else None, max_episode_steps=None)
        try:
            rec = []
            res = rollout(venv, ScriptedGraspPolicy(venv.task, GraspParams()), seed=int(seed), duration=float(duration),
                          record=rec)
            task = venv.task
            clip_model, adr, dt = task.model, task.scene.object_qpos_adr, task.control_dt
            size = float(max(task.scene.obj.extents))
            out = "held" if res["success"][0] else ("dropped" if res["dropped"][0] else
                                                   ("lifted" if res["lifted"][0] else "not lifted"))
            out += ", slipped" if res["slipped"][0] else ""
            panels.append(Panel(f"{contact}", contact, np.stack([r[0] for r in rec]),
                                note=f"{out}; rise {res['final_rise_m'][0] * 100:.1f} cm"))
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


# ----------------------------------------------------------------------------- rendering

def rendering_unavailable() -> str | None:
    """Why videos cannot be rendered here (None when they can): no OpenGL context for
    ``mujoco.Renderer`` (e.g. no display and ``MUJOCO_GL`` unset), or no MP4 writer."""
    try:
        import mujoco

        m = mujoco.MjModel.from_xml_string("<mujoco><worldbody><geom type='sphere' size='.1'/></worldbody></mujoco>")
        r = mujoco.Renderer(m, 16, 16)
        try:
            d = mujoco.MjData(m)
            r.update_scene(d)
            r.render()
        finally:
            r.close()
    except Exception as e:  # any backend failure: no GL library, no device, no display
        return (f"MuJoCo cannot render here ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                f"on a machine without a display set MUJOCO_GL=egl (MUJOCO_GL is {os.environ.get('MUJOCO_GL')!r})")
    try:
        import imageio.v2  # noqa: F401
        import imageio_ffmpeg

        imageio_ffmpeg.get_ffmpeg_exe()
    except Exception as e:
        return f"no MP4 writer ({type(e).__name__}: {e}); reinstall the package's dependencies imageio and imageio-ffmpeg: pip install imageio imageio-ffmpeg"
    return None


def _camera(clip: Clip):
    """A fixed free camera framing the first panel's object path and the bodies near the object
    (a hand), seen from above at 30 degrees."""
    import mujoco

    adr = clip.object_qpos_adr
    q = clip.panels[0].qpos
    pts = [q[:, adr:adr + 3]]
    m, d = clip.model, mujoco.MjData(clip.model)
    start = q[0, adr:adr + 3]
    for f in np.linspace(0, len(q) - 1, min(len(q), 12)).round().astype(int):
        d.qpos[:] = q[f]
        mujoco.mj_kinematics(m, d)
        xb = d.xpos[1:]
        pts.append(xb[np.linalg.norm(xb - start, axis=1) < 0.3])  # the hand, not far-away bodies
    p = np.concatenate(pts)
    p = p[np.isfinite(p).all(axis=1)]
    lo, hi = p.min(axis=0), p.max(axis=0)
    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_FREE
    cam.lookat[:] = (lo + hi) / 2.0
    extent = max(float(np.linalg.norm(hi - lo)), 5.0 * clip.object_size)
    cam.distance, cam.azimuth, cam.elevation = 1.15 * extent + 2.0 * clip.object_size, 135.0, -25.0
    return cam


def _add_trace(scn, points: np.ndarray, rgba, px: float, max_segments: int = 400) -> None:
    """Append the path ``points`` [K, 3] to the renderer's scene as line segments ``px`` pixels
    wide (as many as fit; lines cost a software renderer a fraction of what capsules do)."""
    import mujoco

    if len(points) < 2:
        return
    idx = np.unique(np.linspace(0, len(points) - 1, min(len(points), max_segments + 1)).round().astype(int))
    pts = np.asarray(points[idx], float)
    rgba = np.asarray(rgba, np.float32)
    for a, b in zip(pts[:-1], pts[1:]):
        if scn.ngeom >= scn.maxgeom:
            return
        if not (np.isfinite(a).all() and np.isfinite(b).all()) or np.linalg.norm(b - a) < 1e-9:
            continue
        g = scn.geoms[scn.ngeom]
        mujoco.mjv_initGeom(g, mujoco.mjtGeom.mjGEOM_LINE, np.zeros(3), np.zeros(3), np.eye(3).ravel(), rgba)
        mujoco.mjv_connector(g, mujoco.mjtGeom.mjGEOM_LINE, px, a, b)
        scn.ngeom += 1


def _font(px: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=px)
    except TypeError:  # Pillow < 10.1
        return ImageFont.load_default()


def _rgb255(rgba) -> tuple:
    return tuple(int(255 * c) for c in rgba[:3])


def _label(img, panel: Panel, f: int, t: float, font, small) -> None:
    """Draw the panel's label, its note, the time and its current error onto ``img`` (PIL)."""
    from PIL import ImageDraw

    d = ImageDraw.Draw(img)
    col = _rgb255(PANEL_RGBA.get(panel.kind, (1, 1, 1, 1)))
    d.rectangle([4, 4, 14, 14], fill=col)
    d.text((19, 2), panel.label, fill=(255, 255, 255), font=font, stroke_width=1, stroke_fill=(0, 0, 0))
    if panel.note:
        d.text((6, 19), panel.note, fill=(235, 235, 235), font=small, stroke_width=1, stroke_fill=(0, 0, 0))
    line = f"t {t:5.2f} s"
    if panel.pos_pct is not None:
        ok = panel.valid is None or panel.valid[f]
        line += (f"   error {panel.pos_pct[f]:.1f} % of size, {panel.rot_deg[f]:.1f} deg" if ok else "   (not tracked)")
    d.text((6, img.height - 16), line, fill=(255, 255, 255), font=small, stroke_width=1, stroke_fill=(0, 0, 0))


def render_clip(clip: Clip, *, width: int = 320, height: int = 240, fps: float = 30.0, speed: float = 1.0,
                max_seconds: float | None = None, trace: bool = True) -> np.ndarray:
    """The clip's video frames.

    Args:
      width, height: pixels of one panel (rounded down to even numbers, as H.264 needs).
      fps: video frames per second; speed: episode seconds per video second (0.5: half speed).
      max_seconds: show at most this much of the episode (None: all of it).
      trace: draw the object's centre-of-mass path.
    Returns:
      [N, HEADER_PX + H, P * W, 3] uint8.
    """
    import mujoco
    from PIL import Image, ImageDraw

    if fps <= 0 or speed <= 0:
        raise ConfigError(f"fps and speed must be > 0 (got {fps}, {speed})", key="fps")
    w, h = max(32, int(width) // 2 * 2), max(32, int(height) // 2 * 2)
    m = clip.model
    m.vis.global_.offwidth = max(int(m.vis.global_.offwidth), w)
    m.vis.global_.offheight = max(int(m.vis.global_.offheight), h)
    span = float(clip.times[-1])
    if max_seconds is not None:
        span = min(span, float(max_seconds))
    n = int(np.floor(span / speed * fps + 1e-9)) + 1
    frame_idx = np.minimum(np.searchsorted(clip.times, np.arange(n) * speed / fps - 1e-9), len(clip.times) - 1)
    cam = _camera(clip)
    adr = clip.object_qpos_adr
    ref = clip.panels[0].qpos[:, adr:adr + 3] if clip.panels[0].kind == "recorded" else None
    font, small = _font(13), _font(11)
    out = np.zeros((n, HEADER_PX + h, w * len(clip.panels), 3), np.uint8)
    try:
        renderer = mujoco.Renderer(m, h, w)
    except Exception as e:
        raise RenderError(f"cannot create a MuJoCo renderer ({type(e).__name__}: {e}); set MUJOCO_GL=egl "
                          "before MuJoCo is imported on a machine without a display") from e
    try:
        d = mujoco.MjData(m)
        header = Image.new("RGB", (w * len(clip.panels), HEADER_PX), (24, 24, 24))
        ImageDraw.Draw(header).text((6, 3), clip.title, fill=(255, 255, 255), font=font)
        out[:, :HEADER_PX] = np.asarray(header)
        for k, f in enumerate(frame_idx):
            for j, panel in enumerate(clip.panels):
                d.qpos[:] = panel.qpos[f]
                mujoco.mj_forward(m, d)
                renderer.update_scene(d, camera=cam)
                renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0  # 20x the cost on a software renderer
                if trace:
                    if ref is not None and panel.kind != "recorded":
                        _add_trace(renderer.scene, ref[: f + 1], REFERENCE_RGBA, 2)
                    _add_trace(renderer.scene, panel.qpos[: f + 1, adr:adr + 3], PANEL_RGBA.get(panel.kind, (1, 1, 1, 1)), 3)
                img = Image.fromarray(renderer.render())
                _label(img, panel, int(f), float(clip.times[f]), font, small)
                out[k, HEADER_PX:, j * w:(j + 1) * w] = np.asarray(img)
    finally:
        renderer.close()
    return out


# ----------------------------------------------------------------------------- writing

def write_video(frames: np.ndarray, path, *, fps: float = 30.0) -> Path:
    """Write [N, H, W, 3] uint8 frames to ``path`` atomically: ``.mp4`` (H.264, the ``video``
    extra's imageio + ffmpeg) or ``.gif`` (Pillow)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".gif":
        from PIL import Image

        imgs = [Image.fromarray(f) for f in frames]
        buf = io.BytesIO()
        imgs[0].save(buf, format="GIF", save_all=True, append_images=imgs[1:], duration=int(round(1000 / fps)), loop=0,
                     optimize=True)
        write_bytes_atomic(path, buf.getvalue())
        return path
    if suffix != ".mp4":
        raise ConfigError("the video must be .mp4 or .gif", file=path, key="out")
    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg  # noqa: F401
    except ImportError as e:
        raise RenderError(f"writing {path} needs imageio and imageio-ffmpeg (dependencies of the package): pip install imageio imageio-ffmpeg ({e})") from e
    with atomic_file(path) as tmp:
        writer = imageio.get_writer(tmp, fps=fps, codec="libx264", quality=7, pixelformat="yuv420p",
                                    macro_block_size=2, ffmpeg_log_level="error", format="FFMPEG")
        try:
            for f in frames:
                writer.append_data(f)
        finally:
            writer.close()
    return path


def write_still(frame: np.ndarray, path) -> Path:
    """Write one [H, W, 3] uint8 frame as a PNG (or JPEG) atomically."""
    from PIL import Image

    path = Path(path)
    fmt = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG"}.get(path.suffix.lower())
    if fmt is None:
        raise ConfigError("a still must be .png or .jpg", file=path, key="still")
    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format=fmt, optimize=True)
    write_bytes_atomic(path, buf.getvalue())
    return path


def still_index(clip: Clip, frames: np.ndarray, *, at: float | None = None, speed: float = 1.0, fps: float = 30.0) -> int:
    """Index of the video frame to keep as a still: at episode time ``at`` s, default the end
    (where the traces are complete)."""
    if at is None:
        return len(frames) - 1
    return int(min(len(frames) - 1, max(0, round(at / speed * fps))))


def render_to_files(clip: Clip, out, *, still=None, gif=None, width: int = 320, height: int = 240, fps: float = 30.0,
                    speed: float = 1.0, max_seconds: float | None = None, still_at: float | None = None,
                    gif_width: int | None = None) -> dict:
    """Render ``clip`` and write the video ``out`` (.mp4 or .gif), optionally a PNG ``still``
    and a ``gif``. Returns {"video", "still", "gif", "frames", "seconds"} plus ``clip.info``."""
    frames = render_clip(clip, width=width, height=height, fps=fps, speed=speed, max_seconds=max_seconds)
    res = {**clip.info, "video": str(write_video(frames, out, fps=fps)), "frames": int(len(frames)),
           "seconds": float(len(frames) / fps)}
    if still is not None:
        res["still"] = str(write_still(frames[still_index(clip, frames, at=still_at, speed=speed, fps=fps)], still))
    if gif is not None:
        g = frames
        if gif_width is not None and gif_width < frames.shape[2]:
            from PIL import Image

            s = gif_width / frames.shape[2]
            size = (int(gif_width), int(round(frames.shape[1] * s)))
            g = np.stack([np.asarray(Image.fromarray(f).resize(size, Image.LANCZOS)) for f in frames[:: 2]])
        res["gif"] = str(write_video(g, gif, fps=fps if g is frames else fps / 2))
    return res


# ----------------------------------------------------------------------------- suites

def _policy_picks(ledger: dict) -> list[tuple[str, str, float]]:
    """(which, object, success-rate gap surrogate - analytic) of the policy suite's median and worst
    object (by the size of the gap; the median of an even count is the lower middle)."""
    ms = ledger.get("models") or {}
    s, a = (ms.get("surrogate") or {}).get("per_object") or {}, (ms.get("analytic_nominal") or {}).get("per_object") or {}
    gaps = sorted(((abs(s[o]["success_rate"] - a[o]["success_rate"]), o, s[o]["success_rate"] - a[o]["success_rate"])
                   for o in s if o in a), key=lambda x: (x[0], x[1]))
    if not gaps:
        return []
    med, worst = gaps[(len(gaps) - 1) // 2], gaps[-1]
    return [("median", med[1], med[2]), ("worst", worst[1], worst[2])]


def _clips_of(ledger: dict, checkpoint):
    """(which, clip) of the suite's median and worst test episode (policy: object)."""
    if ledger.get("suite") == "policy":
        from ..envs import ENV_IDS
        from .policy import _objects

        d = (ledger.get("config") or {})["data"]
        env_id = {h: e for e, h in ENV_IDS.items()}[d.get("hand", "parallel_jaw")]
        objs = {o.name: o for o in _objects(d["objects"])}
        ckpt = checkpoint or (ledger["models"].get("surrogate") or {}).get("checkpoint")
        for which, name, gap in _policy_picks(ledger):
            clip = env_clip(env_id, checkpoint=ckpt, object=objs[name], seed=int(d.get("seed", 0)),
                            duration=float(d.get("duration", 3.0)))
            clip.title = f"{ledger.get('suite_name') or 'policy'}: {name} ({which} success-rate gap {gap:+.2f}), copy 0"
            clip.info.update({"which": which, "episode": f"{name}/0", "success_rate_gap": gap})
            yield which, clip
        return
    for which in WHICH:
        yield which, benchmark_clip(ledger, which=which, checkpoint=checkpoint)


def suite_videos(ledger: dict, out_dir, *, checkpoint=None, settings: dict | None = None) -> dict:
    """Videos of the median and the worst test episode of a suite run, for its report.

    ``rig-grasp`` / ``cube-real``: the episodes of median and largest surrogate position error
    (``pick_episode``), recorded / analytic / surrogate; ``policy``: rollouts of the objects of
    median and largest success-rate gap, analytic / surrogate. Written to
    ``out_dir/videos/{median,worst}.mp4`` with a PNG still each. ``settings``: the suite's
    ``video`` section (enabled, width, height, fps, speed, max_seconds).

    Returns {"videos": [{which, episode, video, still (relative to ``out_dir``), ...}]} or
    {"skipped": why} (disabled, rendering unavailable, nothing to rank); a rendering failure is
    reported there too, never raised, so a suite's results are never lost to a video.
    """
    s = {"enabled": True, "width": 320, "height": 240, "fps": 30, "speed": 1.0, "max_seconds": None, **(settings or {})}
    if not s["enabled"]:
        return {"skipped": "disabled (--no-video, or video.enabled: false in the suite config)"}
    suite = ledger.get("suite")
    if suite == "policy":
        if not _policy_picks(ledger):
            return {"skipped": "the surrogate was not evaluated: no success-rate gap to pick rollouts by"}
    elif suite not in ("cube-real", "rig-grasp"):
        return {"skipped": f"suite {suite!r} has no episodes to render"}
    elif ranking_model(ledger) is None:
        return {"skipped": "no model has per-episode pose errors"}
    why = rendering_unavailable()
    if why:
        return {"skipped": why}
    base = Path(out_dir)
    vids = []
    try:
        for which, clip in _clips_of(ledger, checkpoint):
            res = render_to_files(clip, base / "videos" / f"{which}.mp4", still=base / "videos" / f"{which}.png",
                                  width=s["width"], height=s["height"], fps=s["fps"], speed=s["speed"],
                                  max_seconds=s["max_seconds"])
            res["video"] = str(Path(res["video"]).relative_to(base))
            res["still"] = str(Path(res["still"]).relative_to(base))
            vids.append(res)
    except (SurrogateError, OSError, RuntimeError, ValueError, KeyError) as e:
        return {"skipped": f"rendering failed ({type(e).__name__}: {e})", "videos": vids}
    return {"videos": vids}
