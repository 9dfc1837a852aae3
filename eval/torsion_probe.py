"""Probe how much the grip's torsion matters: a checkpoint's law replayed on grasps with MuJoCo's multi-point convex
collision on (as the suites run it) or off for the learned replay, and with the law's own torsional friction set.

With ``--spread off`` each mesh-pad pair touches at one point (``mjDSBL_MULTICCD``), so the friction at the points no
longer resists a turn about the pad normal with the pad's half width as lever (``eval/pad_contact_lever.py``); the
law's ``torsional_friction`` (``spin_law``: the largest torque per unit normal force, m) on the pads then sets the
torsion instead. Each grasp is scored by the decision rule's scorer (``bench.law_selection.benchmark_scores``:
``rig-grasp``'s metrics, which reproduce a suite's rows), and with ``--against LEDGER`` paired by object with that
suite run's ``surrogate`` row (the same checkpoint as the suites run it)::

    python eval/torsion_probe.py DATASET --spread off --torsion 0.0018 --against runs/bench/X/ledger.json --out rows.json

A diagnostic, not a model: the learned law is changed only here, for this replay.
"""

from __future__ import annotations

import argparse
import json
import sys

import mujoco


def probe_rows(dataset, checkpoint, *, spread: bool, torsion: float, delay_s: float) -> list[dict]:
    """Per grasp {id, object, at_horizon, pos_pct, rot_deg} of ``checkpoint``'s law with the pads' torsional friction
    ``torsion`` (m; 0 keeps the checkpoint's) and MuJoCo's multi-point collision ``spread`` on or off."""
    import surrogate.bench.replay as replay
    from surrogate.bench.law_selection import benchmark_scores
    from surrogate.capture import read_dataset
    from surrogate.model.checkpoint import load_checkpoint

    model, card = load_checkpoint(checkpoint)
    if torsion:
        hp = json.loads(json.dumps(card["model"]["hparams"]))
        hp["prior_body"]["torsional_friction"] = float(torsion)
        tuned = type(model)(**hp)
        state = {k: v for k, v in model.state_dict().items() if k != "log_spin"}  # the new term's own value
        tuned.load_state_dict(state, strict=False)
        tuned.contact_groups = model.contact_groups
        model = tuned.eval()
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
        return benchmark_scores(model, eps, ds.meta, substeps=4, margin=0.005, horizon_s=1.0, delay_s=delay_s,
                                progress=False)
    finally:
        replay.prepare_replay = prepare


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
    p.add_argument("--torsion", type=float, default=0.0, help="the pads' torsional friction, m (0: the checkpoint's)")
    p.add_argument("--delay", type=float, default=0.0104, help="the hand's latency, s (the suites' learned rows: 0.0104)")
    p.add_argument("--against", help="a suite's ledger.json whose surrogate row scored the same grasps")
    p.add_argument("--set", help="with --against: the ledger's test set these grasps are (rig-grasp-wide has two)")
    p.add_argument("--out", help="write the per-grasp rows here (JSON)")
    a = p.parse_args(argv)
    rows = probe_rows(a.dataset, a.checkpoint, spread=a.spread == "on", torsion=a.torsion, delay_s=a.delay)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f)
    at = [r["at_horizon"] for r in rows if r["at_horizon"] is not None]
    print(f"{len(rows)} grasps: position % of size at 1 s {sum(at) / max(len(at), 1):.2f}, over the episode "
          f"{sum(r['pos_pct'] for r in rows) / max(len(rows), 1):.2f}")
    if a.against:
        with open(a.against) as f:
            for k, d in paired_against(rows, json.load(f), a.set).items():
                if d.get("ci95"):
                    print(f"minus the ledger's surrogate row, {k}: {d['mean']:+.2f} [{d['ci95'][0]:+.2f}, {d['ci95'][1]:+.2f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
