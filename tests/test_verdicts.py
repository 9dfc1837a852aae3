"""Verdicts a researcher can trust at a glance: one number per concept (ledger, report, video labels, printed
summary), a tie called a tie, like compared with like, one blow-up rule, a randomized baseline that MuJoCo
integrates stably, and checkpoint cards without machine paths.

The suite run is real and tiny (cube-real-small on 5 test tosses, one identification generation, videos at
64 x 48); the rest is hand-computed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from surrogate.bench.ledger import horizon_ratio_verdict, outcome, verdict
from surrogate.bench.report_tables import fmt_summary

from .conftest import needs_shared

REPO = Path(__file__).resolve().parents[1]
CUBE_CKPT = "checkpoints/cube_tosses"
TINY = ["data.n_test=5", "data.train_sizes=[8]", "baselines.identified.sizes=[8]", "baselines.identified.maxiter=1",
        "baselines.identified.popsize=3", "baselines.identified.cones=[elliptic]", "baselines.identified.max_episodes=8",
        "baselines.randomized.n=2", "video.width=64", "video.height=48", "video.fps=8"]


# ----------------------------------------------------------------------------- ties and like with like

def _row(vals, rot=None):
    """A model row with per-episode position (and rotation) errors and their summaries."""
    rot = rot or vals
    eps = [{"id": str(i), "pos_pct_size": v, "rot_deg": r} for i, (v, r) in enumerate(zip(vals, rot))]
    def summ(x):
        return {"n": len(x), "mean": float(np.mean(x)), "median": float(np.median(x)),
                          "mean_ci95": [float(np.mean(x)) - 1, float(np.mean(x)) + 1]}
    return {"overall": {"episodes": len(vals), "pos_pct_size": summ(vals), "rot_deg": summ(rot)}, "per_episode": eps}


def test_a_paired_interval_containing_zero_is_a_tie_never_supported():
    assert outcome({"n": 5, "mean": -0.02, "ci95": [-0.48, 0.43]}, True) == "tie"
    assert outcome({"n": 5, "mean": -1.0, "ci95": [-1.5, -0.5]}, False) == "met"
    assert outcome({"n": 5, "mean": 1.0, "ci95": [0.5, 1.5]}, True) == "missed"
    assert outcome({"n": 0, "mean": None, "ci95": None}, True) == "met"  # nothing paired: the means decide
    rng = np.random.default_rng(0)
    base = list(10 + rng.normal(0, 3, 40))
    noise = list(np.array(base) + rng.normal(0, 3, 40))  # the same on average: a tie
    v = verdict({"analytic_identified": _row(base), "surrogate": _row(noise)})
    assert v["verdict"] == "tie" and v["targets"][0]["outcome"] == "tie" and "a tie" in v["detail"]
    v = verdict({"analytic_identified": _row(base), "surrogate": _row(list(np.array(base) - 2))})
    assert v["verdict"] == "supported"


def _at_1s(vals):
    """``_row`` with the same errors at a 1 s horizon too."""
    r = _row(vals)
    r["overall"]["horizons"] = {"pos_pct_size": {"1": r["overall"]["pos_pct_size"]}}
    for e, v in zip(r["per_episode"], vals):
        e["horizon_pos_pct_size"] = {"1": v}
    return r


def test_a_ratio_target_is_decided_by_the_paired_interval_against_its_bound():
    """surrogate <= 0.5 x best: paired surrogate - 0.5 x best, not the ratio of two noisy means alone."""
    at = _at_1s
    base = [10.0, 12.0, 8.0, 11.0, 9.0, 10.0]
    v = horizon_ratio_verdict({"analytic_nominal": at(base), "surrogate": at([b * 0.3 for b in base])},
                              horizon_s=1.0, max_ratio=0.5)
    assert v["verdict"] == "supported" and v["targets"][0]["paired_against_bound"]["ci95"][1] < 0
    # ratio 0.45 on the means, but one episode far above the bound: the interval against the bound contains zero
    sur = [1.0, 1.0, 1.0, 1.0, 1.0, 21.0]
    v = horizon_ratio_verdict({"analytic_nominal": at(base), "surrogate": at(sur)}, horizon_s=1.0, max_ratio=0.5)
    assert v["targets"][0]["ratio"] < 0.5 and v["verdict"] == "tie" and "a tie" in v["detail"]
    # the verdict's words name the same horizon as the rig suite's "Falsified if"
    from surrogate.suites import load_suite

    cfg = load_suite("rig-grasp-small", [])
    assert "1 s after the close phase starts" in v["detail"]
    assert "1 s after the close phase starts" in " ".join(cfg["falsified_if"].split())
    assert "after the close phase starts" in " ".join(cfg["hypothesis"].split())


def test_the_reports_target_lines_say_the_comparison_the_verdict_applies():
    """The report said "needs <= 1" of every target; a paired interval decides only below zero (strictly), and so do
    the means of the position targets without one."""
    from surrogate.bench.report_tables import target_lines

    base = [10.0, 12.0, 8.0, 11.0, 9.0, 10.0]
    worse = [b + 1 + 0.1 * i for i, b in enumerate(base)]
    v = verdict({"analytic_identified": _row(base), "surrogate": _row(worse)})  # paired: missed
    assert "needs < 1)" in v["detail"] and [t["needs"] for t in v["targets"]] == ["<", "<"]
    assert target_lines(v)[0].endswith("**missed** (ratio 1.12, needs < 1)")
    unpaired = _row(worse)
    unpaired["per_episode"] = []  # no episode scored by both: the means decide, rotation by "at most"
    v = verdict({"analytic_identified": _row(base), "surrogate": unpaired})
    assert [line.rsplit("needs ", 1)[1] for line in target_lines(v)] == ["< 1)", "<= 1)"]
    v = horizon_ratio_verdict({"analytic_nominal": _at_1s(base), "surrogate": _at_1s(worse)}, horizon_s=1.0,
                              max_ratio=0.5)
    assert "needs < 0.5 (" in v["detail"] and target_lines(v)[0].endswith("needs < 0.5)")
    old = {k: x for k, x in v["targets"][0].items() if k != "needs"}  # a ledger written before the field
    assert target_lines({"targets": [old]})[0].endswith("needs < 0.5)")
    assert target_lines({"targets": [{**old, "paired": {"n": 0, "ci95": None}}]})[0].endswith("needs <= 0.5)")


def test_the_verdict_says_what_data_each_side_had():
    s, i = _row([1.0, 2.0]), _row([1.5, 2.5])
    s["train_size"] = 64
    i.update({"train_size": 64, "same_data_as_surrogate": True, "identification": {"identified_on": 32}})
    v = verdict({"analytic_identified": i, "surrogate": s})
    assert v["comparison"].startswith("Compares like with like: the surrogate was trained on 64 training episodes and "
                                      "MuJoCo identified on 32 of the same 64")
    assert v["detail"].startswith(v["comparison"])
    i["same_data_as_surrogate"] = False
    assert verdict({"analytic_identified": i, "surrogate": s})["comparison"].startswith("Compares unequal data")
    s["card"] = {"data": {"name": "rig_grasps", "sha256": "c" * 64}}  # a model of another dataset: named
    assert verdict({"analytic_identified": i, "surrogate": s})["comparison"].startswith(
        "Compares unequal data: the surrogate was trained on 64 training episodes of 'rig_grasps', MuJoCo identified")


# ----------------------------------------------------------------------------- one blow-up rule

def test_one_blowup_rule_for_scores_and_video_labels():
    from surrogate.bench.evaluate import score_episode
    from surrogate.bench.video_clips import _qpos_panel
    from surrogate.capture import Episode, ObjectSpec, Provenance

    T = 40
    true = np.tile([0.0, 0.0, 0.1, 1.0, 0.0, 0.0, 0.0], (T, 1))
    spec = ObjectSpec("box", 0.1, np.eye(3).tolist(), 0.1, {"kind": "box", "half_extents": [0.05] * 3}, 0.5)
    ep = Episode("e", np.arange(T) / 100.0, true, spec, Provenance("test", False, 100.0))
    pred = true.copy()
    pred[10:, 0] = 2.0     # 2 m off: blown up from frame 10 ...
    pred[20:, 0] = 0.0     # ... and back on the recording: still blown up (the rule holds from the first bad frame)
    s = score_episode(pred, ep, size=0.1, horizons=[0.1], divergence={"pos_frac": 0.1, "rot_deg": 15.0}, max_error_m=1.0)
    assert s["unstable"] and s["unstable_at_s"] == pytest.approx(0.10)
    assert s["pos_pct_size"] == pytest.approx(30 / 40 * 1000.0)  # 30 frames at 1 m = 1000 % of 0.1 m
    p = _qpos_panel("analytic (identified)", "analytic", pred, ep, 0, 1.0)
    assert p.mean_pos_pct() == pytest.approx(s["pos_pct_size"], rel=1e-12)
    assert p.note.startswith(f"episode mean {s['pos_pct_size']:.1f} % of size") and "blew up at 0.10 s" in p.note


# ----------------------------------------------------------------------------- the randomized baseline

def test_the_randomized_ensemble_redraws_members_that_blow_up_and_bounds_the_time_constant():
    from surrogate.bench.analytic import AnalyticParams
    from surrogate.bench.identify import stable_ensemble

    center = AnalyticParams(friction=0.5, solref=(0.004, 1.0), solimp=(0.9, 0.95, 0.001), cone="elliptic")
    seen = []

    def stable(params):  # "blows up" above 0.55 friction: a known unstable region
        seen.extend(params)
        return [p.friction <= 0.55 for p in params]

    members, info = stable_ensemble(center, n=6, seed=0, ranges=None, stable=stable, timestep=0.0025)
    assert len(members) == 6 and all(m.friction <= 0.55 for m in members)
    assert info["rejected"] == sum(p.friction > 0.55 for p in seen) > 0 and info["drawn"] == len(seen)
    assert all(m.solref[0] >= 2 * 0.0025 for m in members) and info["timeconst_min"] == pytest.approx(0.005)
    # few draws survive the full ranges: they are halved until enough do
    members, info = stable_ensemble(center, n=4, seed=0, ranges=None, timestep=0.0025,
                                    stable=lambda ps: [abs(np.log(p.friction / 0.5)) < 0.03 for p in ps])
    assert len(members) == 4 and info["shrunk"] >= 1
    assert info["ranges"]["friction"] == pytest.approx([0.7 ** (0.5 ** info["shrunk"]), 1.3 ** (0.5 ** info["shrunk"])])


# ----------------------------------------------------------------------------- one number per concept

@pytest.fixture(scope="module")
def tiny_cube(tmp_path_factory):
    from surrogate.bench.run import run_suite

    base = tmp_path_factory.mktemp("verdicts")
    ledger = run_suite("cube-real-small", out=base / "report", checkpoint=CUBE_CKPT, overrides=TINY, progress=False,
                       cache_dir=base / "cache")
    return ledger, base / "report"


@needs_shared("contactnets_cube")
def test_report_video_labels_and_summary_show_the_ledgers_figures(tiny_cube):
    from surrogate.bench.run import summary_lines

    ledger, out = tiny_cube
    on_disk = json.loads((out / "ledger.json").read_text())
    m, r = on_disk["models"], on_disk["result"]
    report = (out / "report.md").read_text()
    # the verdict, in the report as in the ledger, compares like with like and says so
    assert f"**Result: {r['verdict']}.** {r['detail']}" in report and r["detail"].startswith("Compares like with like")
    ident = m["analytic_identified"]
    assert ident["same_data_as_surrogate"] and ident["train_size"] == m["surrogate"]["train_size"] == 64
    # every model's figures in the report's table and the printed summary are the ledger's
    printed = "\n".join(summary_lines(on_disk))
    for name in ("analytic_nominal", "analytic_identified", "analytic_randomized", "surrogate"):
        o = m[name]["overall"]
        assert f"| {name} | {o['episodes']} | {fmt_summary(o['pos_pct_size'])} |" in report, name
        assert f"{name:22s} position {o['pos_pct_size']['mean']:6.2f} % of size" in printed, name
    # the randomized ensemble's ranges, stability pass and unstable fraction are in the ledger and the report
    en = m["analytic_randomized"]["ensemble"]
    assert set(en["ranges"]) >= {"friction", "timeconst", "mass_scale"} and en["stability_pass"]["drawn"] >= en["n"]
    assert m["analytic_randomized"]["overall"]["unstable_rate"] == 0.0 and "Randomized ensemble:" in report
    # video labels: each panel's "episode mean" is the ledger's figure for that episode and model
    vids = on_disk["videos"]["videos"]
    assert [v["which"] for v in vids] == ["median", "worst"]
    for v in vids:
        for label, model in (("analytic (identified)", "analytic_identified"), ("surrogate", "surrogate")):
            row = next(e for e in m[model]["per_episode"] if e["id"] == v["episode"])
            assert v["panels"][label] == pytest.approx(row["pos_pct_size"], rel=1e-9), (v["which"], label)
            assert v["notes"][label].startswith(f"episode mean {row['pos_pct_size']:.1f} % of size"), (v["which"], label)
        fig = v["ledger_pos_pct_size"]
        assert f"({fig:.1f} % of object size)" in report
    # MuJoCo's warnings went into the run folder, nothing into the current folder
    assert not Path("MUJOCO_LOG.TXT").exists() or Path("MUJOCO_LOG.TXT").stat().st_mtime < (out / "ledger.json").stat().st_mtime


@needs_shared("contactnets_cube")
def test_plots_drop_empty_horizons_and_show_objects_as_a_sorted_dot_plot(tiny_cube):
    from surrogate.bench.report import horizons_figure

    ledger, _ = tiny_cube
    fig = horizons_figure(ledger)
    ticks = [float(x) for x in fig.axes[0].get_xticks()]
    lasting = [float(h) for h, s in ledger["models"]["surrogate"]["overall"]["horizons"]["pos_pct_size"].items() if s["n"]]
    assert ticks == pytest.approx(sorted(lasting))
    import matplotlib.pyplot as plt

    plt.close(fig)


# ----------------------------------------------------------------------------- cards

def _strings(o):
    if isinstance(o, dict):
        for v in o.values():
            yield from _strings(v)
    elif isinstance(o, list):
        for v in o:
            yield from _strings(v)
    elif isinstance(o, str):
        yield o


def test_no_card_under_checkpoints_holds_a_machine_path():
    cards = sorted((REPO / "checkpoints").glob("*/card.json"))
    assert cards
    for card in cards:
        bad = [s for s in _strings(json.loads(card.read_text()))
               if s.startswith(("/", "~")) or re.match(r"^[A-Za-z]:[\\/]", s)]
        assert not bad, f"{card}: {bad[:3]}"


def test_card_paths_are_written_relative_to_the_project_or_the_data_root(tmp_path, monkeypatch):
    from surrogate.paths import portable_path, portable_paths, project_root

    monkeypatch.setenv("SURROGATE_DATA", str(tmp_path / "data"))
    assert portable_path(project_root() / "datasets" / "generated" / "x") == "datasets/generated/x"
    assert portable_path(tmp_path / "data" / "contactnets_cube") == "${SURROGATE_DATA}/contactnets_cube"
    assert portable_path("/somewhere/else/runs/cube") == "cube"  # the card's sha256 names the content
    assert portable_path("runs/x") == "runs/x" and portable_path(None) is None
    cfg = portable_paths({"out_dir": str(project_root() / "runs" / "r"), "data": {"root": "/a/b/c"}, "seed": 1},
                         ["out_dir", "data.root", "export.dir"])
    assert cfg == {"out_dir": "runs/r", "data": {"root": "c"}, "seed": 1}


def test_tables_show_one_episode_as_its_value_and_objects_as_rows():
    from surrogate.bench.report_tables import per_object_lines

    one = {"n": 1, "mean": 2.6, "median": 2.6, "mean_ci95": [2.6, 2.6]}
    assert fmt_summary(one) == "2.6"

    def row(objs):
        return {"overall": {"pos_pct_size": one},
                "per_object": {o: {"episodes": 1, "pos_pct_size": one, "horizons": {"pos_pct_size": {"1": one}}}
                               for o in objs}}

    objs = [f"obj{i}" for i in range(16)]
    led = {"config": {"metrics": {"horizon_origin": "close"}, "acceptance": {"horizon_s": 1.0}},
           "models": {"analytic_nominal": row(objs), "surrogate": row(objs)}}
    lines = per_object_lines(led)
    table = [x for x in lines if x.startswith("| obj") and not x.startswith("| object |")]
    assert len(table) == 16 and all(x.count("|") == 5 for x in table)  # object, episodes, two models
    assert "after the close phase starts" in lines[1]


@needs_shared("contactnets_cube")
def test_a_cards_captures_made_outside_the_project_are_found_beside_its_checkpoint_by_name_and_hash(tmp_path):
    """The main job trains on OUT/rig_captures and exports OUT/checkpoint_rig: the card says "rig_captures"."""
    from surrogate.bench.rig_data import card_data_root
    from surrogate.capture import dataset_hash
    from surrogate.importers.contactnets import import_contactnets

    from .conftest import SHARED

    import_contactnets(SHARED / "contactnets_cube", tmp_path / "captures", progress=False)
    card = {"data": {"root": "captures", "sha256": dataset_hash(tmp_path / "captures")}}
    assert card_data_root(card, tmp_path / "checkpoint") == tmp_path / "captures"
    assert card_data_root({"data": {**card["data"], "sha256": "0" * 64}}, tmp_path / "checkpoint") is None  # other data
    assert card_data_root(card, None) is None
    # in the project's own folder of that name: the same rule (another run's grasps share its episode ids)
    assert card_data_root({"data": {"root": str(tmp_path / "captures"), "sha256": "0" * 64}}) is None
    assert card_data_root({"data": {"root": str(tmp_path / "captures"), "sha256": card["data"]["sha256"]}}) \
        == tmp_path / "captures"


def test_a_toss_suite_fits_mujoco_on_a_checkpoints_tosses_only_where_its_card_names_the_suites_data(tmp_path, caplog):
    """cube-real and elbow-real identify MuJoCo on the surrogate's own training tosses, found by episode id: only in
    the dataset the card names by its hash. Ids name other tosses elsewhere, even under the same name (dair_pll's
    copies of the cube tosses are numbered otherwise), and a rig checkpoint's grasps are 0, 1, ...: a warning."""
    import shutil

    from surrogate.bench.cube_real import given_training

    ck = tmp_path / "ck"
    shutil.copytree(Path(__file__).resolve().parents[1] / "checkpoints" / "cube_tosses", ck)
    card = json.loads((ck / "card.json").read_text())
    ids = card["data"]["train_episodes"]
    by_id = {i: object() for i in ids}
    same = {"name": card["data"]["name"], "hash": card["data"]["sha256"]}
    assert given_training(ck, by_id, set(), data=same) == ids
    assert given_training(ck, by_id, {ids[0]}, data=same) == ids[1:]  # a test toss is never a training toss
    with caplog.at_level("WARNING"):
        assert given_training(ck, by_id, set(), data={**same, "hash": "f" * 64}) is None  # dair_pll's numbering
        assert given_training(ck, by_id, set(), data={"name": "rig_grasps", "hash": "f" * 64}) is None
    assert "not on this suite's 'rig_grasps'" in caplog.text and same["hash"][:12] in caplog.text


# ----------------------------------------------------------------------------- the unit a claim generalizes over

def test_paired_intervals_resample_objects_where_the_claim_is_about_objects():
    """Ten objects with five episodes each; one object carries the whole difference (its grasps all flip). Over
    episodes the interval excludes zero; resampling objects (``by="object"``) it does not: one object's five flips are
    one draw, not five. With one episode per object, or without ``by``, the interval is the one over episodes."""
    from surrogate.metrics import paired_difference

    rng = np.random.default_rng(1)
    a, b = [], []
    for o in range(10):
        for k in range(5):
            i, base = f"o{o}/{k}", 10 + rng.normal(0, 1)
            a.append({"id": i, "object": f"obj{o}", "v": base})
            b.append({"id": i, "object": f"obj{o}", "v": base + (-20.0 if o == 3 else rng.normal(0, 0.2))})
    episodes = paired_difference(a, b, "v")
    objects = paired_difference(a, b, "v", by="object")
    assert episodes["ci95"][1] < 0 and "units" not in episodes  # "significant" over 50 episodes
    assert objects["ci95"][0] < 0 < objects["ci95"][1]  # a tie over 10 objects
    assert objects["units"] == 10 and objects["by"] == "object" and objects["ci95_episodes"] == episodes["ci95"]
    assert objects["mean"] == episodes["mean"] and objects["n"] == episodes["n"] == 50
    singles = [dict(r, object=r["id"]) for r in b]  # one episode per unit: nothing to cluster
    assert paired_difference(a, singles, "v", by="object") == episodes
    cube = [dict(r, object="cube") for r in b]  # a single object (the cube's tosses): a claim about its episodes
    assert paired_difference(a, cube, "v", by="object") == episodes

    # a suite that names the unit (rig-grasp's metrics.paired_by) decides its verdict and words by it
    from surrogate.bench.ledger import suite_verdict
    from surrogate.suites import load_suite

    def row(rows):
        vals = [r["v"] for r in rows]
        eps = [{"id": r["id"], "object": r["object"], "set": "heldout_families", "horizon_pos_pct_size": {"1": r["v"]},
                "pos_pct_size": r["v"]} for r in rows]
        s = {"n": len(vals), "mean": float(np.mean(vals)), "median": float(np.median(vals))}
        return {"overall": {"horizons": {"pos_pct_size": {"1": s}}, "pos_pct_size": s}, "per_episode": eps}

    cfg = load_suite("rig-grasp-small", ["acceptance.max_ratio=1.0"])
    assert cfg["metrics"]["paired_by"] == "object"
    v = suite_verdict(cfg, {"analytic_identified": row(a), "surrogate": row(b)})
    assert v["verdict"] == "tie" and "of 10 objects, resampled by object" in v["detail"]
    cfg["metrics"]["paired_by"] = None
    assert suite_verdict(cfg, {"analytic_identified": row(a), "surrogate": row(b)})["verdict"] == "supported"


def test_the_hypothesis_names_the_size_the_verdict_compares_at():
    """With a checkpoint, cube-real's identified row is the fit on the checkpoint's own training tosses; the note said
    the verdict compared at the largest size identified."""
    from surrogate.bench.ledger import identification_note

    by_size = {str(k): {"identified_on": min(k, 64)} for k in (8, 16, 128, 256)}
    by_size["64"] = {"identified_on": 64, "on": "the surrogate's own training tosses"}
    note = identification_note({"analytic_identified": {"overall": {}, "by_train_size": by_size}})
    assert note.endswith("the verdict compares at 64 training episodes, identified on 64.")
    del by_size["64"]["on"]  # no checkpoint: the largest
    assert identification_note({"analytic_identified": {"overall": {}, "by_train_size": by_size}}).endswith(
        "compares at 256 training episodes, identified on 64.")


def test_an_ensembles_first_divergence_is_its_members_median_in_every_suite():
    """The toss suites took the first member's divergence for the ensemble's (0.05 s where the members' median is
    0.6 s); rig-grasp took the median: one rule now, in ``evaluate.ensemble_mean_score``."""
    from surrogate.bench.evaluate import ensemble_mean_score

    def member(t, which):
        return {"divergence_time_s": t, "divergence_which": which, "unstable": False, "unstable_at_s": None,
                "pos_m": 0.0, "pos_pct_size": 1.0, "rot_deg": 1.0, "final_pos_pct_size": 1.0, "horizon_pos_pct_size": {},
                "horizon_rot_deg": {}, "integrated_pos_pct_size": {}}

    s = ensemble_mean_score([member(0.05, "pose_rotation"), member(0.6, "pose_position"), member(0.9, "pose_position"),
                             member(None, None)])
    assert s["divergence_time_s"] == pytest.approx(0.6) and s["divergence_which"] == "pose_position"
    assert ensemble_mean_score([member(None, None)] * 2)["divergence_time_s"] is None


@needs_shared("ycb_sample")
def test_a_suites_captures_of_an_object_folder_are_made_again_when_the_folder_changes(tmp_path):
    """A test set of a user's object folder is cached by what the folder holds: an object added there is grasped
    (keyed by the path alone, the old captures had been replayed without a word)."""
    import shutil

    from surrogate.bench.rig_data import generated_dataset
    from surrogate.capture import read_dataset

    from .conftest import SHARED

    ycb, objs = SHARED / "ycb_sample" / "ycb", tmp_path / "objects"
    objs.mkdir()
    shutil.copytree(ycb / "036_wood_block", objs / "036_wood_block")
    shutil.copy(ycb / "wood_block.urdf", objs)
    rig = {"config": None, "overrides": [], "hand": "parallel_jaw", "duration": 0.5, "backend": "process"}

    def captures():
        out = generated_dataset({"objects": str(objs), "episodes": 2, "seed": 0}, rig=rig, cache_dir=tmp_path / "cache",
                                workers=1, progress=False, label="meshes")
        return out, sorted({e.object.name for e in read_dataset(out).episodes})

    first, names = captures()
    assert names == ["wood_block"] and captures()[0] == first  # the same folder: the cached set
    shutil.copytree(ycb / "077_rubiks_cube", objs / "077_rubiks_cube")
    shutil.copy(ycb / "rubiks_cube.urdf", objs)
    again, names = captures()
    assert again != first and names == ["rubiks_cube", "wood_block"]


@needs_shared("ycb_sample")
def test_a_checkpoints_own_captures_named_as_the_suites_training_data_are_its_own(tmp_path):
    """``--set data.train=<the captures the checkpoint was trained on>``: MuJoCo is identified on its training
    grasps (like with like), found by the card's content hash; other captures there are the suite's own."""
    import shutil

    from surrogate.bench.rig_data import generated_dataset, train_dataset
    from surrogate.capture import dataset_hash, read_dataset

    from .conftest import SHARED

    objs = tmp_path / "objects"
    objs.mkdir()
    shutil.copytree(SHARED / "ycb_sample" / "ycb" / "036_wood_block", objs / "036_wood_block")
    shutil.copy(SHARED / "ycb_sample" / "ycb" / "wood_block.urdf", objs)
    rig = {"config": None, "overrides": [], "hand": "parallel_jaw", "duration": 0.5, "backend": "process"}
    caps = generated_dataset({"objects": str(objs), "episodes": 3, "seed": 0}, rig=rig, cache_dir=tmp_path / "cache",
                             workers=1, progress=False, label="train")
    ids = [e.episode_id for e in read_dataset(caps).episodes][:2]
    card = {"data": {"root": "somewhere_else", "sha256": dataset_hash(caps), "train_episodes": ids}}
    cfg = {"data": {"train": str(caps)}}
    ds, train_ids = train_dataset(cfg, card=card, rig=rig, cache_dir=tmp_path / "cache", workers=1, progress=False)
    assert ds.root == caps and train_ids == ids
    other = {"data": {**card["data"], "sha256": "0" * 64}}
    assert train_dataset(cfg, card=other, rig=rig, cache_dir=tmp_path / "cache", workers=1, progress=False)[1] == []
