"""``rig-grasp``'s floor: the rig's own physics with each test episode's hidden values drawn again.

A capture records the script (object, grasp, commands) but not the physics' per-episode draws: the true mass and
centre of mass (``mass_mismatch``), the actuator's delay and backlash, the fingertip effects' values (load exponent,
patch radius, relaxation, breakaway) and, for an object no model has seen, the friction field over its surface.
No contact model can read them from a capture, so part of every model's error is theirs. The floor measures that
part: each test episode is simulated again by the rig itself (``rig.simulate.simulate_episode``: the same object,
seed and script, so the same commands) with those values redrawn (``redraw=k``, and the ``friction_map`` seed moved
by ``k + 1``), ``redraws`` times, and the exact trajectories are scored against the recording with the suite's own
scorer, as a model's replay is. Three rows:

- ``rig_exact``: each episode simulated again with its own values (no redraw): a model that knows everything the rig
  drew; what is left is the recording's own noise (the sensors' pathologies);

- ``rig_redrawn``, an ensemble (``rows.ensemble_scored``: per episode the expected error of one redraw, as
  ``analytic_randomized``): a perfect simulator of the rig that does not know the episode's hidden values, one draw;
- ``rig_redrawn_medoid`` (with at least 3 redraws): per episode the one redraw whose object path is closest to the
  others' (``medoid``; chosen from the redraws alone, never from the recording), scored as one deterministic model.
  One draw pays for the spread twice (a Gaussian spread: sqrt(2) times the centre's error); the central draw of a
  few is a coarse estimate of what a deterministic model that knew the rig's physics but not the hidden values could
  reach.

None is a bound: a model can be lucky on few episodes, a few redraws place the centre coarsely, and the rig rows start
from the episode's exact state while a model's replay starts from the recorded, noisy first frames (which favours the
rig rows). A target far below the redrawn rows asks a model to know what the capture does not hold. With ``floor.by_source``, each source (``SOURCES``) is also
redrawn alone, the others kept as the episode's own (``rig_redrawn_only_<source>``): which hidden value the floor
comes from, so which one a sensor or an estimate would have to recover.

Only for test episodes recorded by the suite's rig config (every episode's ``rig_config_sha256`` must match: the
suite's own sets, or ``--test-data`` generated with it) whose commands the rig still produces (another version of
the rig may script the same seed differently); otherwise the row says why it is not evaluated.
"""

from __future__ import annotations

import copy

import numpy as np

from ..parallel import Executor
from ..rig.effects import FINGERTIP_EFFECTS
from .rig_scoring import scene_qpos

ROW = "rig_redrawn"
MEDOID_ROW = "rig_redrawn_medoid"
EXACT_ROW = "rig_exact"
# what a redraw draws again: the rig's hidden per-episode purposes (``rig.simulate.HIDDEN_PURPOSES``) and the surface,
# {source: (what it is, the rig effects that draw it)}
SOURCES = {"mass_mismatch": ("true mass and COM", ("mass_mismatch",)),
           "actuator": ("actuator delay and backlash", ("actuator_delay_backlash",)),
           "fingertips": ("the fingertip effects' values", FINGERTIP_EFFECTS),
           "surface": ("the object's friction field", ("friction_map",))}


def floor_settings(cfg: dict) -> tuple[int, bool]:
    """The suite's ``floor.redraws`` (0: no floor rows) and ``floor.by_source`` (also a row per source redrawn alone)."""
    from ..errors import ConfigError

    f = cfg.get("floor") or {}
    n, by = f.get("redraws", 0), f.get("by_source", False)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError(f"floor.redraws must be a non-negative integer, got {n!r}", key="floor.redraws")
    if not isinstance(by, bool):
        raise ConfigError(f"floor.by_source must be true or false, got {by!r}", key="floor.by_source")
    return n, by


def redrawn_config(rig_cfg: dict, k: int) -> dict:
    """The rig config of redraw ``k`` of the surface: the objects' friction fields seeded ``k + 1`` further."""
    out = copy.deepcopy(rig_cfg)
    fm = out["effects"]["friction_map"]
    fm["seed"] = (int(fm["seed"]) + int(k) + 1) % 2**31
    return out


def trace_prediction(replay, meta, trace) -> tuple[np.ndarray, np.ndarray | None]:
    """``(qpos [F, nq], pad forces [F, S, 3])`` of a rig trace of the replay's episode, as a model's replay gives
    them: the exact object pose and hand joints as scene ``qpos``; the exact force on each sensed pad (sensor frame).

    Raises ValueError when the trace does not have the episode's frames."""
    ep = replay.episode
    if len(trace.times) != ep.num_frames:
        raise ValueError(f"episode {ep.episode_id}: the rig trace has {len(trace.times)} frames, the capture "
                         f"{ep.num_frames}")
    names = list(trace.joint_names)
    joint_cols = [names.index(n) for n in meta.joint_names or ()]
    if ep.joint_cmd is not None and joint_cols:  # the capture stores float32 commands
        off = float(np.max(np.abs(np.asarray(trace.joint_cmd, dtype=float)[:, joint_cols] - ep.joint_cmd), initial=0.0))
        if off > 1e-5:
            raise ValueError(f"episode {ep.episode_id}: the rig's commands for its seed differ from the capture's by "
                             f"up to {off:.3g} (recorded by another version of the rig)")
    jp = np.asarray(trace.joint_pos, dtype=float)
    joints = None if ep.joint_pos is None else jp[:, joint_cols]
    q = scene_qpos(replay, np.asarray(trace.object_pose, dtype=float), joints)
    if not replay.sensors:
        return q, None
    sensors = list(trace.sensor_names)
    cols = [sensors.index(meta.wrench_sensors[c]) for c, _, _ in replay.sensors]
    return q, np.asarray(trace.pad_wrench, dtype=float)[:, cols, :3]


def _floor_task(common: dict, item) -> tuple:
    """Redraw k of one test episode, of the ``sources`` named (``SOURCES``; k None: the episode's own draw):
    ``(qpos [F, nq], pad forces [F, S, 3] or None)``."""
    from ..rig.simulate import simulate_episode
    from ..scenes.from_capture import asset_from_spec
    from .rig_grasp import _replay  # the suite's replays, cached per worker (imported here: rig_grasp imports this)

    key, ep, meta, k, sources = item
    replay = _replay(common, ("test", key), ep, meta)
    g = ep.provenance.generator
    cfg = redrawn_config(common["rig_cfg"], k) if k is not None and "surface" in sources else common["rig_cfg"]
    trace = simulate_episode(cfg, asset_from_spec(ep.object), hand=g["hand"], seed=int(g["seed"]),
                             duration=float(g["script"]["physics"]["duration_s"]), redraw=k,
                             redraw_only=tuple(s for s in sources if s != "surface"))
    return trace_prediction(replay, meta, trace)


def medoid(qpos: list[np.ndarray], adr: int) -> int:
    """The index of the trajectory (``qpos`` [K] of [F, nq]) whose object position (columns ``adr:adr + 3``) has the
    least summed mean distance to the others' (the lowest index among equals)."""
    p = np.stack([q[:, adr:adr + 3] for q in qpos])  # [K, F, 3]
    d = np.linalg.norm(p[:, None] - p[None], axis=-1).mean(axis=-1)  # [K, K]
    return int(np.argmin(d.sum(axis=1)))


def source_enabled(rig_cfg: dict, source: str) -> bool:
    """Whether the rig config draws anything for ``source`` (``SOURCES``): its effect (or one of them) is on."""
    return any(rig_cfg["effects"].get(n, {}).get("enabled") for n in SOURCES[source][1])


def unavailable(test: list, rig_cfg_hash: str) -> str | None:
    """Why the floor cannot be computed for the ``test`` episodes [(key, episode, meta)], or None."""
    for key, ep, _ in test:
        g = ep.provenance.generator or {}
        if g.get("rig_config_sha256") != rig_cfg_hash or "seed" not in g:
            return f"episode {key} was recorded with another rig config than the suite's"
    return None


def floor_rows(ex: Executor, test: list, *, rig: dict, redraws: int, sim: dict, scorer, replays: dict,
               by_source: bool = False) -> dict:
    """The ledger rows {``rig_exact``, ``rig_redrawn``, ``rig_redrawn_medoid`` (3 redraws or more)}: every test episode
    simulated again with its own values and ``redraws`` times redrawn; or {``rig_redrawn``: a ``not evaluated`` row
    saying why}; with ``by_source``, also
    ``rig_redrawn_only_<source>`` for each of ``SOURCES`` redrawn alone (the others the episode's own): which hidden
    value the floor comes from. ``rig``: the suite's ``rig_data.rig_settings`` (config path and overrides);
    ``replays``: {key: ``replay.Replay``} of the test episodes."""
    from ..config import config_hash
    from ..rig.generate import load_config
    from .rows import ensemble_scored, scored

    rig_cfg = load_config(rig.get("config"), rig.get("overrides", ()))

    why = unavailable(test, config_hash(rig_cfg))
    if why:
        return {ROW: {"status": "not evaluated", "reason": why}}
    common = {"token": ex.token, "substeps": sim["substeps"], "margin": sim["margin"], "rig_cfg": rig_cfg}

    def members_of(sources: tuple, desc: str) -> list[dict]:
        items = [(key, ep, meta, k, sources) for key, ep, meta in test for k in range(redraws)]
        runs = ex.map(_floor_task, items, common=common, desc=desc, unit="episode")
        return [{key: runs[i * redraws + k] for i, (key, _, _) in enumerate(test)} for k in range(redraws)]

    try:
        exact = ex.map(_floor_task, [(key, ep, meta, None, ()) for key, ep, meta in test], common=common,
                       desc="rig, own draw", unit="episode")
    except ValueError as e:  # the rig's trace does not match a capture (frames): say so, keep the suite's other rows
        return {ROW: {"status": "not evaluated", "reason": str(e)}}
    members = members_of(tuple(SOURCES), "rig redrawn")
    what = ("the rig itself, each test episode simulated again with its hidden per-episode values (true mass and COM, "
            "actuator delay and backlash, the fingertip effects' values) and the object's friction field redrawn")
    rows = {EXACT_ROW: {"description": "the rig itself, each test episode simulated again with its own hidden values: "
                                       "a model that knows everything the rig drew; what is left is the recording's "
                                       "noise (bench.rig_floor)",
                        **scored(scorer, {key: run for (key, _, _), run in zip(test, exact)})},
            ROW: {"description": f"{what}, {redraws} times: what a perfect model of the rig that cannot see them "
                                 "scores with one draw (bench.rig_floor)",
                  "redraws": redraws, **ensemble_scored(scorer, members)}}
    if redraws >= 3:
        central = {}
        for key, _, _ in test:
            runs_k = [m[key] for m in members]
            central[key] = runs_k[medoid([q for q, _ in runs_k], replays[key].scene.object_qpos_adr)]
        rows[MEDOID_ROW] = {"description": f"{what}, {redraws} times; per episode the redraw closest to the others "
                                           "(the medoid of the object paths, chosen without the recording): a "
                                           "deterministic model that knows the rig's physics but not the hidden values",
                            "redraws": redraws, **scored(scorer, central)}
    for source, (words, _) in SOURCES.items() if by_source else ():
        if not source_enabled(rig_cfg, source):  # nothing drawn: the row would be rig_exact under another name
            rows[f"{ROW}_only_{source}"] = {"status": "not evaluated", "reason": f"{words}: its effect is off in the "
                                                                                   "rig config"}
            continue
        rows[f"{ROW}_only_{source}"] = {
            "description": f"the rig itself with {words} alone redrawn, {redraws} times (every other hidden value the "
                           "episode's own): this source's share of the floor (bench.rig_floor)",
            "redraws": redraws, **ensemble_scored(scorer, members_of((source,), f"rig redrawn, {source} only"))}
    return rows
