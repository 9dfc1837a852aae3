"""What moves `elbow-real`'s error: the contact law's parameters, or something no contact parameter reaches.

    python eval/elbow_sensitivity.py [--checkpoint checkpoints/cube_tosses] [--tosses pool|test] [--factor 4]

On the real elbow the cube release scores about what every analytic model scores (README). Before a contact model
is changed for that object, this asks whether a contact model's parameters can move the error at all: each global
parameter of the checkpoint's law scaled down and up by ``--factor`` (stiffness, damping), its friction set to a
range of values with the static coefficient equal to it (no Stribeck rise), and nominal MuJoCo at the same friction
values; and on the object's side, nominal MuJoCo with dry friction in the hinge (constant, or proportional to the
force the hinge carries; the URDF gives it none) and with other masses and inertias (the URDF's inertia tensors are
a 0.1 m cube's, its masses may be too). Every row is rolled out as the suite rolls out its surrogate row
(``elbow_real.surrogate_predict``'s stepper path, every link's floor contacts) or its analytic rows, from the
suite's first-state estimate, and scored by the suite's scorer; by default on the few-shot training pool (the
tosses the test split never sees): nothing here is read from, or tuned to, the test tosses.

Printed per row: the first link's position error in % of its size over the whole toss and at the suite's horizons,
its rotation error, the hinge error; and how far the object goes after its first impact against the recording
(``travel``: per toss, the predicted displacement from ``--after-s`` to the end along the recorded one, divided by
the recorded length; the median over tosses that move at least 3 cm, with the number that stop short). Writes
nothing.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

MIN_TRAVEL_M = 0.03  # a toss that moves less after its impact says nothing about how far a model lets it go


def travel_ratio(rec_xy: np.ndarray, pred_xy: np.ndarray, timestamps: np.ndarray, after_s: float) -> float | None:
    """The predicted horizontal displacement from ``after_s`` (s after the first frame) to the last frame, projected
    on the recorded one and divided by its length; None where the recording moves less than ``MIN_TRAVEL_M``.
    rec_xy, pred_xy [T, 2] (m); timestamps [T] (s)."""
    i = int(np.searchsorted(np.asarray(timestamps) - timestamps[0], after_s))
    rec = np.asarray(rec_xy, float)[-1] - np.asarray(rec_xy, float)[i]
    length = float(np.linalg.norm(rec))
    if length < MIN_TRAVEL_M:
        return None
    pred = np.asarray(pred_xy, float)[-1] - np.asarray(pred_xy, float)[i]
    return float(pred @ rec) / length**2


def law_variant(checkpoint, values: dict):
    """The checkpoint's contact model with global law parameters replaced in every group: ``values`` {name: value}
    (names of ``ContactLawGNN``'s ``log_<name>`` parameters, the law's own units)."""
    import torch

    from surrogate.model.checkpoint import load_checkpoint

    model, _ = load_checkpoint(checkpoint)
    with torch.no_grad():
        for name, v in values.items():
            getattr(model, f"log_{name}").fill_(math.log(v))
    return model


def law_values(checkpoint) -> dict:
    """{name: value} of the checkpoint's law in its first (surface) group."""
    model = law_variant(checkpoint, {})
    names = ["stiffness", "damping", "friction"] + (["static_friction", "stribeck_speed"] if model.stribeck else [])
    return {n: float(getattr(model, f"log_{n}")[0].detach().exp()) for n in names}


def predict_law(model, episodes, cfg: dict, *, margin: float) -> dict:
    """{episode id: [T, 7 + J]}: ``episodes`` rolled out with ``model`` owning every link's floor contacts, as the
    suite's surrogate row does (``elbow_real.surrogate_predict``; ``elbow_fewshot.predict_groups``), at the contact
    ``margin`` (m) of the checkpoint the model came from."""
    from surrogate.bench.elbow_fewshot import predict_groups

    sim = cfg["simulation"]
    return predict_groups(model, episodes, substeps=sim["substeps"], init_frames=sim["init_frames"], margin=margin)[0]


def predict_mujoco(friction: float, episodes, cfg: dict, *, hinge: tuple[float, float] = (0.0, 0.0),
                   link_mass: float = 1.0, inertia: float = 1.0) -> dict:
    """{episode id: [T, 7 + J]}: nominal MuJoCo (the suite's solref, solimp and cone) at ``friction``; ``hinge``
    (N m, m): dry friction in the object's hinges, a constant torque bound plus one proportional to the force the
    joint carries (a pin in its bore: bound = constant + c |reaction|, the reaction of the step before, MuJoCo's
    ``frictionloss`` set per step); ``link_mass``: the last link's mass (and inertia) times this, ``inertia``: every
    link's inertia times this (the suite computes the links' inertias from their boxes at uniform density).
    Without any of them the suite's own batched rollouts (``predict_analytic``)."""
    from surrogate.bench.analytic import AnalyticParams, TossSet, models_for, simulate_tosses
    from surrogate.bench.predictors import object_scene, predict_analytic

    nom, sim = cfg["baselines"]["nominal"], cfg["simulation"]
    p = AnalyticParams(friction=friction, solref=tuple(nom["solref"]), solimp=tuple(nom["solimp"]), cone=nom["cone"])
    if not any(hinge) and link_mass == 1.0 and inertia == 1.0:
        return predict_analytic([p], episodes, substeps=sim["substeps"], init_frames=sim["init_frames"])[0]
    if len({(e.object.name, e.provenance.capture_rate_hz) for e in episodes}) != 1:
        raise ValueError("one object at one capture rate: the scene is built once")
    scene = object_scene(episodes[0], substeps=sim["substeps"], mode="analytic")
    links = scene.meta["object_link_bodies"]
    scene.model.body_mass[links[-1]] *= link_mass  # the copies below take the scene's masses as their base
    scene.model.body_inertia[links[-1]] *= link_mass
    scene.model.body_inertia[links] *= inertia
    tosses = TossSet.from_episodes(episodes, substeps=sim["substeps"], k=sim["init_frames"])
    if any(hinge):
        preds = hinge_friction_rollouts(scene, models_for(scene, [p])[0], tosses, *hinge)
    else:
        out = simulate_tosses(scene, [p], tosses)[0]
        preds = [out[i, :e.num_frames] for i, e in enumerate(episodes)]
    return {e.episode_id: q for e, q in zip(episodes, preds)}


def hinge_friction_rollouts(scene, model, tosses, constant: float, per_load: float) -> list[np.ndarray]:
    """Each toss stepped alone in ``model`` with every hinge's dry-friction bound set before each step to
    ``constant`` + ``per_load`` x the norm of the force its child link received through it at the step before
    (``cfrc_int``, after ``mj_rnePostConstraint``): [T, 7 + J] base pose and joints per toss."""
    import mujoco

    from surrogate.sim.rollout import object_states

    hinges = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    dofs, children = model.jnt_dofadr[hinges], model.jnt_bodyid[hinges]
    a = scene.object_qpos_adr
    cols = list(range(a, a + 7)) + list(scene.meta["object_joint_qpos_adr"])
    states, data, out = object_states(scene, tosses.qpos0, tosses.qvel0), mujoco.MjData(model), []
    for i, n in enumerate(tosses.n_frames):
        mujoco.mj_setState(model, data, states[i], mujoco.mjtState.mjSTATE_FULLPHYSICS)
        mujoco.mj_forward(model, data)
        q, load = np.zeros((int(n), len(cols))), np.zeros(len(hinges))
        q[0] = data.qpos[cols]
        for f in range(1, int(n)):
            for _ in range(tosses.substeps):
                model.dof_frictionloss[dofs] = constant + per_load * load
                mujoco.mj_step(model, data)
                mujoco.mj_rnePostConstraint(model, data)
                load = np.linalg.norm(data.cfrc_int[children, 3:6], axis=1)
            q[f] = data.qpos[cols]
        out.append(q)
    return out


def row(name: str, preds: dict, episodes, cfg: dict, after_s: float) -> dict:
    """The suite's overall scores of ``preds`` and the travel after the first impact."""
    from surrogate.bench.cube_real import toss_scorer
    from surrogate.bench.evaluate import aggregate

    agg = aggregate(toss_scorer(episodes, cfg).score(preds), horizons=cfg["metrics"]["horizons_s"])
    ratios = [r for e in episodes if (r := travel_ratio(e.object_pose[:, :2], preds[e.episode_id][:, :2],
                                                        e.timestamps, after_s)) is not None]
    return {"name": name, "pos": agg["pos_pct_size"]["mean"], "rot": agg["rot_deg"]["mean"],
            "joint": agg["joint_deg"]["mean"],
            "at": {h: v["mean"] for h, v in agg["horizons"]["pos_pct_size"].items()},
            "travel": float(np.median(ratios)) if ratios else float("nan"),
            "short": int(sum(r < 1.0 for r in ratios)), "moved": len(ratios)}


def variants(base: dict, factor: float, frictions: list[float]) -> list[tuple[str, dict]]:
    """(label, law values) of the rows: the release, stiffness and damping / and x ``factor``, each friction in
    ``frictions`` with the static coefficient equal to it."""
    out = [("the release", {})]
    for k in ("stiffness", "damping"):
        out += [(f"{k} / {factor:g}", {k: base[k] / factor}), (f"{k} x {factor:g}", {k: base[k] * factor})]
    for mu in frictions:
        out.append((f"friction {mu:g}, static = kinetic",
                    {"friction": mu, **({"static_friction": mu} if "static_friction" in base else {})}))
    return out


def suite_tosses(suite: str, which: str, max_tosses: int | None = None) -> tuple[dict, list, list]:
    """(the suite's config, its ``which`` tosses ("pool" or "test") as recorded, the same from their free-flight
    start as the suite scores them), the first ``max_tosses`` of them."""
    from surrogate.bench.elbow_real import from_flight_start
    from surrogate.bench.run import CACHE_DIR
    from surrogate.bench.toss_data import load_tosses
    from surrogate.splits import suite_split
    from surrogate.suites import load_suite

    cfg = load_suite(suite)
    ds = load_tosses(cfg["data"]["source"], cache_dir=CACHE_DIR, urdf=cfg["data"]["urdf"], progress=False)
    eps, sp = suite_split(ds.episodes, cfg["data"], [])
    by_id = {e.episode_id: e for e in eps}
    raw = [by_id[i] for i in sp[which][:max_tosses]]
    return cfg, raw, from_flight_start(raw, cfg)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default="checkpoints/cube_tosses", help="the law whose parameters are moved")
    p.add_argument("--tosses", choices=["pool", "test"], default="pool",
                   help="the few-shot training pool (default: the test split never sees it) or the test split")
    p.add_argument("--factor", type=float, default=4.0, help="stiffness and damping scaled by 1/F and F (default 4)")
    p.add_argument("--frictions", type=float, nargs="+", default=[0.08, 0.12, 0.2, 0.3])
    p.add_argument("--hinge-friction", type=float, nargs="*", default=[0.01, 0.05],
                   help="nominal MuJoCo with a constant dry friction in the hinge (N m)")
    p.add_argument("--pin-friction", type=float, nargs="*", default=[0.005, 0.02],
                   help="nominal MuJoCo with hinge friction proportional to the force the hinge carries (m: the "
                        "pin's radius times its friction coefficient)")
    p.add_argument("--link-mass", type=float, nargs="*", default=[0.5, 2.0],
                   help="nominal MuJoCo with the second link's mass (and inertia) times these")
    p.add_argument("--inertia", type=float, nargs="*", default=[0.6, 1.6],
                   help="nominal MuJoCo with every link's inertia times these (hollow or dense links)")
    p.add_argument("--after-s", type=float, default=0.15, help="travel counted from here (the first impact's time)")
    p.add_argument("--max-tosses", type=int, default=None, help="the first N tosses only")
    p.add_argument("--suite", default="elbow-real")
    args = p.parse_args(argv)
    if args.factor <= 1.0:
        p.error("--factor must be above 1")
    from surrogate.bench.analytic import nominal_params
    from surrogate.bench.predictors import DEFAULT_MARGIN
    from surrogate.model.checkpoint import load_checkpoint

    cfg, _, tosses = suite_tosses(args.suite, args.tosses, args.max_tosses)
    base = law_values(args.checkpoint)
    print(f"{len(tosses)} {args.tosses} tosses of {args.suite}; the law of {args.checkpoint}: "
          + ", ".join(f"{k} {v:.4g}" for k, v in base.items()))
    margin = float(load_checkpoint(args.checkpoint)[1].get("data", {}).get("margin_m", DEFAULT_MARGIN))
    rows = [row(label, predict_law(law_variant(args.checkpoint, v), tosses, cfg, margin=margin), tosses, cfg,
                args.after_s) for label, v in variants(base, args.factor, args.frictions)]
    rows += [row(f"nominal MuJoCo, friction {mu:g}", predict_mujoco(mu, tosses, cfg), tosses, cfg, args.after_s)
             for mu in args.frictions]
    mu0 = nominal_params(tosses[0], cfg["baselines"]["nominal"]).friction  # the nominal row's own (the URDF's)
    rows += [row(f"nominal MuJoCo, hinge friction {c:g} N m", predict_mujoco(mu0, tosses, cfg, hinge=(c, 0.0)),
                 tosses, cfg, args.after_s) for c in args.hinge_friction]
    rows += [row(f"nominal MuJoCo, hinge friction {c:g} m x its load", predict_mujoco(mu0, tosses, cfg, hinge=(0.0, c)),
                 tosses, cfg, args.after_s) for c in args.pin_friction]
    rows += [row(f"nominal MuJoCo, link 2's mass x {f:g}", predict_mujoco(mu0, tosses, cfg, link_mass=f), tosses, cfg,
                 args.after_s) for f in args.link_mass]
    rows += [row(f"nominal MuJoCo, inertias x {f:g}", predict_mujoco(mu0, tosses, cfg, inertia=f), tosses, cfg,
                 args.after_s) for f in args.inertia]
    hs = list(rows[0]["at"])
    print(f"| row | position % (whole toss) | at {', '.join(hs)} s | rotation deg | hinge deg | travel after "
          f"{args.after_s:g} s, median (stopped short) |")
    print("|---|---:|---|---:|---:|---|")
    for r in rows:
        at = " / ".join(f"{r['at'][h]:.1f}" for h in hs)
        print(f"| {r['name']} | {r['pos']:.1f} | {at} | {r['rot']:.1f} | "
              f"{r['joint']:.1f} | {r['travel']:.2f} ({r['short']} of {r['moved']}) |")
    law = [r["pos"] for r in rows if not r["name"].startswith("nominal")]
    print(f"the law's rows span {min(law):.1f} to {max(law):.1f} % over the whole toss")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
