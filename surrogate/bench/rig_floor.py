"""``rig-grasp``'s floor: the rig's own physics with each test episode's hidden values drawn again.

A capture records the script (object, grasp, commands) but not the physics' per-episode draws: the true mass and
centre of mass (``mass_mismatch``), the actuator's delay and backlash, the fingertip effects' values (load exponent,
patch radius, relaxation, breakaway) and, for an object no model has seen, the friction field over its surface.
No contact model can read them from a capture, so part of every model's error is theirs. The floor measures that
part: each test episode is simulated again by the rig itself (``rig.simulate.simulate_episode``: the same object,
seed and script, so the same commands) with those values redrawn (``redraw=k``, and the ``friction_map`` seed moved
by ``k + 1``), ``redraws`` times, and the exact trajectories are scored against the recording with the suite's own
scorer, as a model's replay is. Three rows:

- ``rig_exact``: each episode's exact state as the rig recorded it beside the capture (its ``truth.*`` features: the
  object pose, hand joints and pad forces before any sensor), else simulated again with its own values (no redraw):
  a model that knows everything the rig drew; what is left is the recording's own noise (the sensors' pathologies);

- ``rig_redrawn``, an ensemble (``rows.ensemble_scored``: per episode the expected error of one redraw, as
  ``analytic_randomized``): a perfect simulator of the rig that does not know the episode's hidden values, one draw;
- ``rig_redrawn_medoid`` (with at least 3 redraws): per episode the one redraw whose object path is closest to the
  others' (``medoid``; chosen from the redraws alone, never from the recording), scored as one deterministic model.
  One draw pays for the spread twice (a Gaussian spread: sqrt(2) times the centre's error); the central draw of a
  few is a coarse estimate of what a deterministic model that knew the rig's physics but not the hidden values could
  reach.

None is a bound: a model can be lucky on few episodes, and a few redraws place the centre coarsely. The rig rows start
from the episode's exact state while a model's replay starts from the recorded, noisy first frames; a model replayed
from the exact state does no better (``eval/start_state.py``: the recorded start carries the tracker's bias every row
is scored against). A target far below the redrawn rows asks a model to know what the capture does not hold. With
``floor.by_source``, each source (``SOURCES``) is also redrawn alone, the others kept as the episode's own
(``rig_redrawn_only_<source>``): which hidden value the floor comes from, so which one a sensor or an estimate would
have to recover.

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


def exact_prediction(replay, meta, *, object_pose, joint_names, joint_pos, sensor_names, pad_wrench
                     ) -> tuple[np.ndarray, np.ndarray | None]:
    """``(qpos [F, nq], pad forces [F, S, 3])`` of the replay's episode from the rig's exact state, as a model's replay
    gives them: ``object_pose`` [F, 7] and the hand joints ``joint_pos`` [F, J] (columns ``joint_names``) as scene
    ``qpos``; the force part of ``pad_wrench`` [F, S', 6] (sensor frame, columns ``sensor_names``) on each sensed pad.

    Raises ValueError when the state does not have the episode's frames."""
    ep = replay.episode
    if len(object_pose) != ep.num_frames:
        raise ValueError(f"episode {ep.episode_id}: the rig trace has {len(object_pose)} frames, the capture "
                         f"{ep.num_frames}")
    names = list(joint_names)
    joints = None if ep.joint_pos is None else np.asarray(joint_pos, dtype=float)[:, [names.index(n) for n in
                                                                                       meta.joint_names or ()]]
    q = scene_qpos(replay, np.asarray(object_pose, dtype=float), joints)
    if not replay.sensors:
        return q, None
    sensors = list(sensor_names)
    cols = [sensors.index(meta.wrench_sensors[c]) for c, _, _ in replay.sensors]
    return q, np.asarray(pad_wrench, dtype=float)[:, cols, :3]


def trace_prediction(replay, meta, trace) -> tuple[np.ndarray, np.ndarray | None]:
    """``exact_prediction`` of a rig trace (``rig.trace.RigTrace``) of the replay's episode, simulated again.

    Raises ValueError when the trace does not have the episode's frames or its commands are not the capture's."""
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
    return exact_prediction(replay, meta, object_pose=trace.object_pose, joint_names=trace.joint_names,
                            joint_pos=trace.joint_pos, sensor_names=trace.sensor_names, pad_wrench=trace.pad_wrench)


TRUTH_KEYS = ("object_pose", "joint_pos", "pad_wrench")  # the ``truth.*`` features the exact row reads


def recorded_state(truth: dict, meta, frames: int, keys=TRUTH_KEYS) -> dict | None:
    """The exact state the rig stored beside a capture of ``frames`` frames (``Episode.truth``: float32, the rig's own
    trace to about 1e-7 m), its ``keys`` of {object_pose [F, 7], joint_pos [F, J] (``meta.joint_names``), pad_wrench
    [F, S, 6] (``meta.wrench_sensors``)}, or None when the episode does not hold them (another source, or another
    layout: its frames, joints or pads are not the capture's)."""
    if not all(k in truth for k in keys):
        return None
    state = {k: np.asarray(truth[k]) for k in keys}
    joints, sensors = len(meta.joint_names or ()), len(meta.wrench_sensors or ())
    shapes = {"object_pose": (frames, 7), "joint_pos": (frames, joints), "pad_wrench": (frames, sensors, 6)}
    return state if all(state[k].shape == shapes[k] for k in keys) else None


def truth_prediction(replay, meta, truth: dict) -> tuple[np.ndarray, np.ndarray | None] | None:
    """``exact_prediction`` from the exact state the rig recorded beside the capture (``recorded_state``), or None
    when the episode does not hold it."""
    state = recorded_state(truth, meta, replay.episode.num_frames)
    if state is None:
        return None
    return exact_prediction(replay, meta, object_pose=state["object_pose"], joint_names=list(meta.joint_names or ()),
                            joint_pos=state["joint_pos"], sensor_names=list(meta.wrench_sensors or ()),
                            pad_wrench=state["pad_wrench"])


def recorded_truths(sets: dict) -> dict:
    """{``set/episode id``: the ``Episode.truth`` arrays the exact row reads (``TRUTH_KEYS``)} of the test sets ({set
    name: ``CaptureDataset``}), read again with the evaluation-only ``truth.*`` features (the suite reads its test
    episodes without them)."""
    from ..capture import read_dataset

    return {f"{name}/{e.episode_id}": {k: v for k, v in e.truth.items() if k in TRUTH_KEYS} for name, ds in sets.items()
            for e in read_dataset(ds.root, include_truth=True).episodes}


def _floor_task(common: dict, item) -> tuple:
    """Redraw k of one test episode, of the ``sources`` named (``SOURCES``; k None: the episode's own draw):
    ``(qpos [F, nq], pad forces [F, S, 3] or None)``."""
    from ..rig.simulate import simulate_episode
    from ..scenes.from_capture import asset_from_spec
    from .rig_grasp import cached_replay  # the suite's replays (imported here: rig_grasp imports this)

    key, ep, meta, k, sources = item
    replay = cached_replay(common, ("test", key), ep, meta)
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
               by_source: bool = False, truths: dict | None = None) -> dict:
    """The ledger rows {``rig_exact``, ``rig_redrawn``, ``rig_redrawn_medoid`` (3 redraws or more)}: every test episode
    simulated again with its own values and ``redraws`` times redrawn; or {``rig_redrawn``: a ``not evaluated`` row
    saying why}; with ``by_source``, also
    ``rig_redrawn_only_<source>`` for each of ``SOURCES`` redrawn alone (the others the episode's own): which hidden
    value the floor comes from. ``rig``: the suite's ``rig_data.rig_settings`` (config path and overrides);
    ``replays``: {key: ``replay.Replay``} of the test episodes; ``truths``: {key: ``Episode.truth``}
    (``recorded_truths``): an episode whose exact state the rig recorded is not simulated again for ``rig_exact``."""
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
        exact = {key: truth_prediction(replays[key], meta, (truths or {}).get(key, {})) for key, _, meta in test}
        again = [(key, ep, meta, None, ()) for key, ep, meta in test if exact[key] is None]  # no recorded truth
        if again:
            exact.update(zip((i[0] for i in again), ex.map(_floor_task, again, common=common, desc="rig, own draw",
                                                           unit="episode")))
    except ValueError as e:  # the rig's trace does not match a capture (frames): say so, keep the suite's other rows
        return {ROW: {"status": "not evaluated", "reason": str(e)}}
    members = members_of(tuple(SOURCES), "rig redrawn")
    what = ("the rig itself, each test episode simulated again with its hidden per-episode values (true mass and COM, "
            "actuator delay and backlash, the fingertip effects' values) and the object's friction field redrawn")
    rows = {EXACT_ROW: {"description": "the rig itself, each test episode's exact state (as the rig recorded it, else "
                                       "simulated again with its own hidden values): a model that knows everything "
                                       "the rig drew; what is left is the recording's noise (bench.rig_floor)",
                        "simulated_again": len(again), **scored(scorer, exact)},
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
