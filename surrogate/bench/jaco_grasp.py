"""A scripted grasp-and-lift with the Kinova Jaco arm and hand (``scenes.jaco``), under MuJoCo's analytic contact and
under the learned contact, both through the public entry point ``surrogate.hybrid`` on the same ``MjModel``:
``surrogate jaco`` prints the outcome of each and their time per physics step, and can write a side-by-side video.

The script: the arm starts above the object (damped-least-squares IK of the pinch site, the hand pointing down,
fingers open), descends to just below the object's centre, closes the fingers (their servos saturate at the grip torque), lifts
by ``LIFT`` and holds. The outcome is the one outcome definition (``rig.scripts.episode_labels``: lifted, dropped,
slipped) read from the trajectory as ``rig.outcomes`` reads every grasp, the fingertip frames standing in for pads.

Shapes: F frames of the control rate (``CONTROL_DT``); nq, nu of the Jaco model.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import mujoco
import numpy as np

from ..errors import ConfigError
from ..rig.config import default_rig_config
from ..rig.outcomes import hand_object_distance, relative_pose
from ..rig.scripts import episode_labels
from ..scenes.jaco import ARM_JOINTS, FINGER_RANGE, GRIP_SITE, TIP_SITES, JacoScene

if TYPE_CHECKING:  # the stepper (torch) loads when a grasp runs, not with `surrogate --help`
    from ..hybrid_mjcf import Hybrid

CONTROL_DT = 0.02  # s: one control (and recorded frame) every 10 physics steps of 2 ms
PHASES = {"descend": (0.0, 1.2), "close": (1.2, 2.0), "lift": (2.0, 3.5), "hold": (3.5, 4.5)}  # s
APPROACH = 0.10  # m above the grasp point at the start
LIFT = 0.12  # m
GRASP_BELOW = 0.015  # m: the pinch site this far below the object's centre, so the curling fingertips close under
# its equator (above it they push it down and ride over it)
# the hand pointing down (the pinch site's z axis to -z), its fingers closing along world x
DOWN = np.array([[1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, -1.0]])


def arm_ik(m: mujoco.MjModel, pos, rot=DOWN, *, q0=None, seed: int = 0, restarts: int = 64, iters: int = 300) -> np.ndarray:
    """[6] arm joint angles that put the pinch site at ``pos`` [3] (m) with orientation ``rot`` [3, 3] (damped least
    squares from ``q0``, then from seeded random starts inside the joint ranges until one converges to 0.1 mm / 1 mrad).

    Raises:
      ConfigError: no start converged (the pose is out of the arm's reach).
    """
    d = mujoco.MjData(m)
    jid = np.array([m.joint(j).id for j in ARM_JOINTS])
    qa, da = m.jnt_qposadr[jid], m.jnt_dofadr[jid]
    lim = m.jnt_limited[jid].astype(bool)
    lo, hi = np.where(lim, m.jnt_range[jid, 0], -np.pi), np.where(lim, m.jnt_range[jid, 1], np.pi)
    rng = np.random.default_rng(seed)
    target_q = np.zeros(4)
    mujoco.mju_mat2Quat(target_q, np.asarray(rot, dtype=float).ravel())
    sid = m.site(GRIP_SITE).id
    starts = ([np.asarray(q0, dtype=float)] if q0 is not None else []) + [rng.uniform(lo, hi) for _ in range(restarts)]
    for q in starts:
        d.qpos[qa] = q
        for _ in range(iters):
            e = _pose_error(m, d, sid, pos, target_q)
            if np.linalg.norm(e[:3]) < 1e-4 and np.linalg.norm(e[3:]) < 1e-3:
                return d.qpos[qa].copy()
            jp, jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
            mujoco.mj_jacSite(m, d, jp, jr, sid)
            J = np.vstack([jp, jr])[:, da]
            dq = J.T @ np.linalg.solve(J @ J.T + 1e-3 * np.eye(6), e)
            d.qpos[qa] = np.where(lim, np.clip(d.qpos[qa] + np.clip(dq, -0.2, 0.2), lo, hi), d.qpos[qa] + np.clip(dq, -0.2, 0.2))
    raise ConfigError(f"the Jaco cannot put its pinch site at {np.round(pos, 3).tolist()} pointing down "
                      f"({len(starts)} IK starts): move the object within reach", key="object_xy")


def _pose_error(m, d, sid: int, pos, target_q) -> np.ndarray:
    """[6] (position error, rotation error as a world-frame rotation vector) of site ``sid`` after ``mj_kinematics``."""
    mujoco.mj_kinematics(m, d)
    mujoco.mj_comPos(m, d)
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, d.site_xmat[sid])
    r = np.zeros(3)
    mujoco.mju_subQuat(r, target_q, q)  # in the site's frame
    return np.concatenate([np.asarray(pos) - d.site_xpos[sid], d.site_xmat[sid].reshape(3, 3) @ r])


def grasp_yaw(points: np.ndarray, *, n: int = 72) -> float:
    """rad: the direction (about world z) across which the object's horizontal width is smallest, where the fingers
    close (``points`` [V, 3]: its vertices as it rests)."""
    yaw = np.linspace(0.0, np.pi, n, endpoint=False)
    proj = points[:, :2] @ np.stack([np.cos(yaw), np.sin(yaw)])  # [V, n]
    return float(yaw[np.argmin(proj.max(0) - proj.min(0))])


def grasp_plan(m: mujoco.MjModel, js: JacoScene, *, below: float = GRASP_BELOW) -> dict:
    """Arm joint targets [6] of the script's three poses: ``above`` (start), ``grasp`` (the pinch site ``below`` the
    object's centre, the fingers closing across its narrowest width) and ``lifted`` (``LIFT`` above it); each solved
    from the previous one, so the arm moves along a continuous branch."""
    centre = np.asarray(js.object_pos, dtype=float) - [0.0, 0.0, below]
    yaw = grasp_yaw(js.object_points)
    c, s = np.cos(yaw), np.sin(yaw)
    rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ DOWN
    above = arm_ik(m, centre + [0, 0, APPROACH], rot)
    grasp = arm_ik(m, centre, rot, q0=above)
    return {"above": above, "grasp": grasp, "lifted": arm_ik(m, centre + [0, 0, LIFT], rot, q0=grasp)}


def _ramp(t: float, t0: float, t1: float) -> float:
    """0 before t0, 1 after t1, a smoothstep between (the servo targets move without a jolt)."""
    x = min(max((t - t0) / (t1 - t0), 0.0), 1.0)
    return x * x * (3 - 2 * x)


def grasp_controls(t: float, plan: dict, js: JacoScene, m: mujoco.MjModel) -> np.ndarray:
    """[nu] the script's actuator targets at time ``t`` (s)."""
    ctrl = np.zeros(m.nu)
    arm = plan["above"] + _ramp(t, *PHASES["descend"]) * (plan["grasp"] - plan["above"])
    arm = arm + _ramp(t, *PHASES["lift"]) * (plan["lifted"] - plan["grasp"])
    ctrl[[m.actuator(a).id for a in js.arm_actuators]] = arm
    c0, c1 = PHASES["close"]
    fingers = FINGER_RANGE[0] + _ramp(t, c0, c0 + 0.6 * (c1 - c0)) * (FINGER_RANGE[1] - FINGER_RANGE[0])
    ctrl[[m.actuator(a).id for a in js.finger_actuators]] = fingers
    return ctrl


def start_state(h: Hybrid, js: JacoScene, plan: dict) -> mujoco.MjData:
    """An ``MjData`` of ``h.model`` at the script's start: the arm at ``above``, the fingers open, the object at rest."""
    m = h.model
    d = h.make_data()
    jid = [m.joint(j).id for j in ARM_JOINTS]
    d.qpos[m.jnt_qposadr[jid]] = plan["above"]
    for a in js.finger_actuators:
        d.qpos[m.jnt_qposadr[m.actuator_trnid[m.actuator(a).id, 0]]] = FINGER_RANGE[0]
    d.ctrl[:] = grasp_controls(0.0, plan, js, m)
    mujoco.mj_forward(m, d)
    return d


def script_controls(plan: dict, js: JacoScene, m: mujoco.MjModel) -> np.ndarray:
    """[1, S, nu] the script's actuator targets per physics step (held over each control period), for ``sim.rollout``."""
    nsub = round(CONTROL_DT / m.opt.timestep)
    n = int(round(PHASES["hold"][1] / CONTROL_DT))
    per_frame = np.stack([grasp_controls((k + 1) * CONTROL_DT, plan, js, m) for k in range(n)])
    return np.repeat(per_frame, nsub, axis=0)[None]


def run_grasp(h: Hybrid, js: JacoScene, plan: dict, *, contact: str) -> dict:
    """The scripted grasp under ``contact`` (``analytic`` or ``surrogate``), through the one rollout API
    (``sim.rollout``: ``mujoco.rollout`` for analytic, the hybrid stepper ``h.stepper`` for surrogate).

    Returns:
      {"qpos": [F, nq], "times": [F] s, "labels": ``episode_labels``' dict, "step_s": s of wall time per physics
       step}.
    """
    from ..sim.rollout import rollout, states_from_qpos

    m = h.model
    d = start_state(h, js, plan)
    controls = script_controls(plan, js, m)
    nsub = round(CONTROL_DT / m.opt.timestep)
    state0 = states_from_qpos(m, d.qpos[None], d.qvel[None])
    t0 = time.perf_counter()
    traj = rollout(h.scene, state0, controls, contact="analytic" if contact == "analytic" else h.stepper,
                   substeps=nsub, threads=1)
    wall = time.perf_counter() - t0
    qpos = traj.qpos[0]
    ob, base = m.body("object").id, m.body("hand/hand").id
    sites = [m.site(s).id for s in TIP_SITES]
    series = {k: [] for k in ("object_pos", "rel_pad", "rel_pos", "rel_quat")}
    for q in qpos:
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        for key, v in zip(series, (d.xpos[ob].copy(), *relative_pose(d, ob, base, sites))):
            series[key].append(v)
    fingers = [m.geom(f"hand/finger_{p}_{i}").id for p in ("knuckle", "tip") for i in range(1, 4)]
    dist = hand_object_distance(m, d, fingers, [m.geom(g).id for g in js.object_geoms])
    times = np.arange(len(qpos)) * CONTROL_DT
    labels = episode_labels(times, *(np.asarray(series[k]) for k in series), np.full(len(qpos), dist),
                            {k: list(v) for k, v in PHASES.items()}, default_rig_config()["script"])
    return {"qpos": qpos, "times": times, "labels": labels, "step_s": wall / controls.shape[1]}


def jaco_hybrid(js: JacoScene, *, checkpoint=None, contact_model=None, **stepper_options) -> Hybrid:
    """``surrogate.hybrid`` on the Jaco scene: the learned model (a checkpoint folder, or a loaded ``contact_model``;
    default the released ``rig_default``) owns every contact of the object."""
    from ..hybrid_mjcf import hybrid

    return hybrid(js.spec, owned=list(js.object_geoms), checkpoint=checkpoint, contact_model=contact_model,
                  **stepper_options)


def held_state(h: Hybrid, js: JacoScene, plan: dict) -> mujoco.MjData:
    """An ``MjData`` of ``h.model`` holding the object lifted (the script run under the learned contact to the
    start of its hold phase): the state ``step_rates`` times."""
    from ..sim.rollout import STATE_SPEC, rollout, states_from_qpos

    m = h.model
    d = start_state(h, js, plan)
    nsub = round(CONTROL_DT / m.opt.timestep)
    frames = int(round(PHASES["hold"][0] / CONTROL_DT)) + 1
    traj = rollout(h.scene, states_from_qpos(m, d.qpos[None], d.qvel[None]), script_controls(plan, js, m),
                   contact=h.stepper, substeps=nsub, frames=frames)
    mujoco.mj_setState(m, d, traj.state[0, -1], STATE_SPEC)
    d.ctrl[:] = grasp_controls((frames - 1) * CONTROL_DT, plan, js, m)  # the last period's targets, held
    mujoco.mj_forward(m, d)
    return d


def step_rates(h: Hybrid, d: mujoco.MjData, *, min_seconds: float = 1.0, chunk: int = 20, timer=time.perf_counter) -> dict:
    """Physics steps per second of ``d`` under analytic and under learned contact, each from the same state
    (restored before every chunk of ``chunk`` steps, so both time the same held grasp): {"analytic", "surrogate",
    "ratio", "contacts"} (``contacts``: the owned contacts at that state)."""
    m = h.model
    snap = mujoco.MjData(m)
    mujoco.mj_copyData(snap, m, d)
    out = {}
    for contact in ("analytic", "surrogate"):
        steps, spent = 0, 0.0
        while spent < min_seconds:
            mujoco.mj_copyData(d, m, snap)
            t0 = timer()
            h.step(d, nstep=chunk, contact=contact)
            spent += timer() - t0
            steps += chunk
        out[contact] = steps / spent
    mujoco.mj_copyData(d, m, snap)
    mujoco.mj_forward(m, d)
    owned = set(h.scene.object_geom_ids.tolist())
    out["contacts"] = int(sum(int(d.contact.geom1[i]) in owned or int(d.contact.geom2[i]) in owned for i in range(d.ncon)))
    out["ratio"] = out["surrogate"] / out["analytic"]
    return out


def compare(objects, *, checkpoint=None, assets=None, progress: bool = True) -> list[dict]:
    """The scripted grasp of each object under both contacts: one row per object, {"object", "mass_kg",
    "analytic": labels, "surrogate": labels, "step_us": {contact: µs per physics step}, "result": both runs}."""
    from tqdm.auto import tqdm

    from ..scenes.jaco import jaco_spec

    rows = []
    for obj in tqdm(objects, desc="Jaco grasps", unit="object", disable=not progress):
        js = jaco_spec(obj, assets=assets)
        h = jaco_hybrid(js, checkpoint=checkpoint)
        plan = grasp_plan(h.model, js)
        res = {c: run_grasp(h, js, plan, contact=c) for c in ("analytic", "surrogate")}
        rows.append({"object": obj.name, "mass_kg": float(obj.mass), **{c: r["labels"] for c, r in res.items()},
                     "step_us": {c: 1e6 * r["step_s"] for c, r in res.items()}, "result": res, "hybrid": h, "scene": js})
    return rows


def format_rows(rows: list[dict]) -> str:
    """The rows of ``compare`` as a Markdown table and the held count of each contact."""
    lines = ["| object | mass (g) | analytic | rise (mm) | learned | rise (mm) | µs/step analytic / learned |",
             "|---|---:|---|---:|---|---:|---:|"]
    for r in rows:
        a, s = r["analytic"], r["surrogate"]
        lines.append(f"| {r['object']} | {1e3 * r['mass_kg']:.0f} | {_word(a)} | {1e3 * a['final_rise_m']:.0f} | "
                     f"{_word(s)} | {1e3 * s['final_rise_m']:.0f} | {r['step_us']['analytic']:.0f} / {r['step_us']['surrogate']:.0f} |")
    n = len(rows)
    held = {c: sum(r[c]["lifted"] and not r[c]["dropped"] for r in rows) for c in ("analytic", "surrogate")}
    lines.append(f"lifted and held at the end: analytic {held['analytic']}/{n}, learned {held['surrogate']}/{n}")
    return "\n".join(lines)


def grasp_clip(row: dict, *, label: str):
    """A side-by-side ``Clip`` (analytic | learned) of one row of ``compare``, for ``video_render.render_to_files``."""
    from .video_clips import Clip, Panel

    h, res = row["hybrid"], row["result"]
    m = h.model
    adr = int(m.jnt_qposadr[m.body_jntadr[m.body("object").id]])
    panels = [Panel(f"analytic MuJoCo ({_word(row['analytic'])})", "analytic", res["analytic"]["qpos"]),
              Panel(f"learned {label} ({_word(row['surrogate'])})", "surrogate", res["surrogate"]["qpos"])]
    size = float(np.ptp(row["scene"].object_points, axis=0).max())
    return Clip(model=m, object_qpos_adr=adr, object_size=size, times=res["analytic"]["times"], panels=panels,
                title=f"Kinova Jaco (dm_control), held-out {row['object']}: scripted grasp and lift")


def _word(lab: dict) -> str:
    """The outcome of one grasp in a word."""
    return ("dropped" if lab["dropped"] else "slipped" if lab["slipped"] else "held") if lab["lifted"] else "not lifted"


def run(args) -> list[dict]:
    """``surrogate jaco``: the scripted grasp of ``--count`` objects of ``--objects`` (a split's name or a folder of
    meshes/URDFs, read as ``rig generate --objects`` reads it) under both contacts."""
    import json

    from ..rig.generate import load_objects
    from ..scenes.jaco import jaco_assets

    assets = jaco_assets(args.assets)  # a clear error before any work when the assets are missing
    objs = load_objects(args.objects)[0]
    if args.count < 1:
        raise ConfigError(f"--count must be >= 1, got {args.count}", key="count")
    pick = np.unique(np.linspace(0, len(objs) - 1, min(args.count, len(objs))).round().astype(int))
    rows = compare([objs[i] for i in pick], checkpoint=args.checkpoint, assets=assets, progress=not args.json)
    if args.video:
        from .video_render import render_to_files

        label = Path(args.checkpoint).name if args.checkpoint else "rig_default"
        rows[0]["video"] = render_to_files(grasp_clip(rows[0], label=label), args.video, width=400, height=300)["video"]
    plain = [{k: v for k, v in r.items() if k not in ("result", "hybrid", "scene")} for r in rows]
    if args.json:
        print(json.dumps({"assets": str(assets), "checkpoint": args.checkpoint or "rig_default", "rows": plain}, default=float))
    else:
        print(f"Kinova Jaco (dm_control assets {assets}), objects {args.objects}, checkpoint {args.checkpoint or 'rig_default'}")
        print(format_rows(rows))
        if args.video:
            print(f"video: {rows[0]['video']}")
    return plain


def jaco_speed(contact_model, *, min_seconds: float = 1.0, timer=time.perf_counter, assets=None, threads: int = 1
               ) -> dict:
    """``surrogate speed --robot jaco``: physics steps per second of the Jaco holding the first held-out object
    (``held_state``), analytic and learned (``step_rates``; batch 1: one ``MjData``); ``threads``: the network's
    (``Stepper(num_threads=...)``)."""
    from ..objects import load_split
    from ..scenes.jaco import jaco_spec

    obj = load_split("heldout")[0]
    js = jaco_spec(obj, assets=assets)
    h = jaco_hybrid(js, contact_model=contact_model, num_threads=threads)
    d = held_state(h, js, grasp_plan(h.model, js))
    return {"robot": "jaco", "object": obj.name, **step_rates(h, d, min_seconds=min_seconds, timer=timer)}
