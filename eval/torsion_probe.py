"""Probe how much the grip's torsion matters: a checkpoint's law replayed on grasps with MuJoCo's multi-point convex
collision on (as the suites run it) or off for the learned replay, with the law's own torsional friction set, or with
the pads' contacts as one patch whose friction and torsion share one limit.

With ``--spread off`` each mesh-pad pair touches at one point (``mjDSBL_MULTICCD``), so the friction at the points no
longer resists a turn about the pad normal with the pad's half width as lever (``eval/pad_contact_lever.py``); the
law's ``torsional_friction`` (``spin_law``: the largest torque per unit normal force, m) on the pads then sets the
torsion instead.

With ``--patch`` (the constant law of a checkpoint without corrections; the spread stays on) the law is the
package's patch law (``friction_ellipse``, since the twenty-fifth session; before it this script replaced the
compiled step's friction lines with the same arithmetic): each pad-object pair's points at their force-weighted
centre (``model.patch.patch_centres``) and friction and torsion about the normal on one elliptic limit of length
``e`` = ``--torsion`` (m; ``law.patch_law``). A turn under a small tangential load meets ``mu e N`` of torsion, a grip
carrying its object near ``mu N`` almost none.

Each grasp is scored by the decision rule's scorer (``bench.law_selection.benchmark_scores``: ``rig-grasp``'s metrics,
which reproduce a suite's rows, and the replay's outcome labels), the slip rate among lifted grasps is set beside the
recording's, and with ``--against LEDGER`` the grasps are paired by object with that suite run's ``surrogate`` row (the
same checkpoint as the suites run it)::

    python eval/torsion_probe.py DATASET --spread off --torsion 0.0018 --against runs/bench/X/ledger.json --out rows.json
    python eval/torsion_probe.py DATASET --patch --torsion 0.0024 --against runs/bench/X/ledger.json --set heldout_wide

A diagnostic, not a model: the learned law is changed only here, for this replay.
"""

from __future__ import annotations

import argparse
import json
import sys

import mujoco

from surrogate.atomic import write_json_atomic


def _with_torsion(model, card, torsion: float, patch: bool = False):
    """A copy of the checkpoint's model with the pads' torsional friction ``torsion`` m, or (``patch``) the pads as
    patches whose friction and torsion share one limit of length ``torsion`` (``friction_ellipse``)."""
    hp = json.loads(json.dumps(card["model"]["hparams"]))
    hp["prior_body"]["torsional_friction"] = float(torsion)
    if patch:
        hp["friction_ellipse"] = True
    tuned = type(model)(**hp)
    state = {k: v for k, v in model.state_dict().items() if k != "log_spin"}  # the new term's own value
    tuned.load_state_dict(state, strict=False)
    tuned.contact_groups = model.contact_groups
    return tuned.eval()


def probe_rows(dataset, checkpoint, *, spread: bool, torsion: float, delay_s: float, patch: bool = False) -> list[dict]:
    """Per grasp {id, object, at_horizon, pos_pct, rot_deg, outcome, recorded} of ``checkpoint``'s law with the pads'
    torsional friction ``torsion`` (m; 0 keeps the checkpoint's), MuJoCo's multi-point collision ``spread`` on or off,
    or (``patch``) the pads' points as one patch with friction and torsion on one ellipse of radius ``torsion``;
    ``recorded``: the grasp's recorded outcome labels."""
    import surrogate.bench.replay as replay
    from surrogate.bench.law_selection import benchmark_scores
    from surrogate.capture import read_dataset
    from surrogate.model.checkpoint import load_checkpoint

    model, card = load_checkpoint(checkpoint)
    if patch and (card["model"]["hparams"].get("corrections") or not torsion):
        raise SystemExit("--patch needs a law without corrections (its table's rows are the two groups) and --torsion > 0")
    if torsion:
        model = _with_torsion(model, card, torsion, patch)
    prepare = replay.prepare_replay

    def one_point(*a, **k):
        r = prepare(*a, **k)
        if k.get("mode") == "external":  # the learned replay only
            r.scene.model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_MULTICCD)
        return r

    ds = read_dataset(dataset)
    eps = [e for e in ds.episodes if e.joint_pos is not None]
    if not spread:
        replay.prepare_replay = one_point
    try:
        rows = benchmark_scores(model, eps, ds.meta, substeps=4, margin=0.005, horizon_s=1.0, delay_s=delay_s,
                                progress=False)
    finally:
        replay.prepare_replay = prepare
    return [{**r, "recorded": dict(ep.labels or {})} for r, ep in zip(rows, eps)]


def slip_rates(rows: list[dict]) -> dict:
    """{probe, recording: (slip rate among lifted grasps, lifted grasps)}: the suites' own rate (``grasp_outcome.rates``;
    a grasp without labels is left out)."""
    from surrogate.bench.grasp_outcome import rates

    def rate(labels):
        r = rates([x or None for x in labels])
        return (float("nan") if r["slip_rate"] is None else r["slip_rate"], r["lifted"])

    return {"probe": rate([r["outcome"] for r in rows]), "recording": rate([r["recorded"] for r in rows])}


def paired_against(rows: list[dict], ledger: dict, set_name: str | None = None) -> dict:
    """{metric: paired_difference (probe - the ledger's surrogate row)} at the suite's horizon and over the episode."""
    from surrogate.metrics import paired_difference

    ref = [{"id": r["id"].split("/")[-1], "object": r["object"], "at_horizon": (r.get("horizon_pos_pct_size") or {}).get("1"),
            "pos_pct": r["pos_pct_size"]} for r in ledger["models"]["surrogate"]["per_episode"]
           if set_name is None or r.get("set") == set_name]
    mine = [{**r, "id": r["id"].split("/")[-1]} for r in rows]
    return {k: paired_difference(ref, mine, k, by="object") for k in ("at_horizon", "pos_pct")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", help="a capture dataset of grasps (e.g. a suite's cached test set)")
    p.add_argument("--checkpoint", default="checkpoints/rig_default")
    p.add_argument("--spread", choices=("on", "off"), default="off", help="MuJoCo's multi-point collision (default off)")
    p.add_argument("--torsion", type=float, default=0.0,
                   help="the pads' torsional friction, m (0: the checkpoint's); with --patch the ellipse's radius e")
    p.add_argument("--patch", action="store_true", help="the pads' points as one patch, friction and torsion on one "
                   "ellipse (the spread stays on)")
    p.add_argument("--delay", type=float, default=0.0104, help="the hand's latency, s (the suites' learned rows: 0.0104)")
    p.add_argument("--against", help="a suite's ledger.json whose surrogate row scored the same grasps")
    p.add_argument("--set", help="with --against: the ledger's test set these grasps are (rig-grasp-wide has two)")
    p.add_argument("--out", help="write the per-grasp rows here (JSON)")
    a = p.parse_args(argv)
    rows = probe_rows(a.dataset, a.checkpoint, spread=a.spread == "on" or a.patch, torsion=a.torsion, delay_s=a.delay,
                      patch=a.patch)
    if a.out:
        write_json_atomic(a.out, rows)
    at = [r["at_horizon"] for r in rows if r["at_horizon"] is not None]
    print(f"{len(rows)} grasps: position % of size at 1 s {sum(at) / max(len(at), 1):.2f}, over the episode "
          f"{sum(r['pos_pct'] for r in rows) / max(len(rows), 1):.2f}")
    s = slip_rates(rows)
    print(f"slip rate among lifted grasps: probe {s['probe'][0]:.3f} ({s['probe'][1]} lifted), recording "
          f"{s['recording'][0]:.3f} ({s['recording'][1]} lifted), gap {s['probe'][0] - s['recording'][0]:+.3f}")
    if a.against:
        with open(a.against) as f:
            for k, d in paired_against(rows, json.load(f), a.set).items():
                if d.get("ci95"):
                    print(f"minus the ledger's surrogate row, {k}: {d['mean']:+.2f} [{d['ci95'][0]:+.2f}, {d['ci95'][1]:+.2f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
