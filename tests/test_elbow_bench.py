"""``surrogate bench elbow-real-small``: cube-trained models predicting the real elbow tosses, few-shot rows (MuJoCo
identified on N elbow tosses; the release fine-tuned on them by gradient through the articulated twin), and
``--test-data`` with another elbow dataset (where hidden tosses are scored)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from surrogate.bench.analytic import TossSet
from surrogate.bench.elbow_fewshot import finetune_law, law_values, refit_keys, toss_loss
from surrogate.bench.predictors import DEFAULT_MARGIN, object_scene
from surrogate.capture import read_dataset
from surrogate.cli import main
from surrogate.model.checkpoint import load_checkpoint
from surrogate.model.law_ranges import check_model, range_problems

from .conftest import SHARED, eval_script, needs_shared

ELBOW = SHARED / "contactnets_elbow"
CKPT = Path(__file__).resolve().parents[1] / "checkpoints" / "cube_tosses"


@needs_shared("contactnets_elbow")
@needs_shared("contactnets_cube")
def test_elbow_real_small_end_to_end(tmp_path, capsys):
    out = tmp_path / "bench"
    assert main(["bench", "elbow-real-small", "--checkpoint", str(CKPT), "--out", str(out), "--quiet",
                 "--set", "data.n_test=6", "--set", "few_shot.identified.fit_on=impacts"]) == 0
    led = json.loads((out / "ledger.json").read_text())  # written through the schema's validation
    assert led["suite"] == "elbow-real" and led["suite_name"] == "elbow-real-small"
    models = led["models"]
    assert {"analytic_nominal", "analytic_identified", "analytic_randomized", "surrogate",
            "analytic_identified_elbow_8"} <= set(models)
    assert models["analytic_identified"]["trained_on"] == "cube" and models["analytic_identified"]["same_data_as_surrogate"]
    assert models["analytic_nominal"]["params"]["friction"] == pytest.approx(0.3)  # the URDF's
    for name in ("analytic_nominal", "analytic_identified", "surrogate", "analytic_identified_elbow_8"):
        o = models[name]["overall"]
        assert o["episodes"] == 6 and o["pos_pct_size"]["mean"] > 0 and o["joint_deg"]["mean"] > 0
        assert set(o["links"]) == {"elbow_1", "elbow_2"} and o["unstable_rate"] == 0
        assert o["divergence"]["time_s"]["median"] < 0.5  # everything diverges at the first impact
    paired = {(d["vs"], d["metric"]): d for d in models["analytic_identified_elbow_8"]["paired"]}
    assert set(paired) == {(v, k) for v in ("analytic_identified", "surrogate") for k in ("pos_pct_size", "rot_deg", "joint_deg")}
    assert all(d["n"] == 6 for d in paired.values())
    st = models["surrogate"]["stepper"]  # the release stepped every link's floor contacts, with no fallback
    assert st["contacts"] > 0 and st["fallbacks"] == 0 and st["mujoco_resets"] == 0
    # the first link's figures are the ledger's pos_pct_size (link 1's frame is its centre of mass)
    s = models["surrogate"]["overall"]
    assert s["links"]["elbow_1"]["pos_pct_size"]["mean"] == pytest.approx(s["pos_pct_size"]["mean"], rel=1e-9)
    _check_finetuned(led)
    report = (out / "report.md").read_text()
    assert "## Articulated object: joint angle and every link" in report
    assert "| surrogate_finetuned_elbow_8 |" in report and "Few-shot, N = 8" in led["result"]["detail"]
    assert "joint" in capsys.readouterr().out
    # the few-shot rows fit their 8 pool tosses from where free flight starts, as the test tosses are scored: toss 459
    # of this split's pool is still held for its first 6 frames
    for name in ("analytic_identified_elbow_8", "surrogate_finetuned_elbow_8"):
        assert models[name]["train_free_flight_starts"] == {"459": 6}, name
    # MuJoCo identified on each training toss's window around its first impact (the option this run sets), the
    # fine-tune on the whole tosses (the suite's config), both on the same 8
    ident, fitted = models["analytic_identified_elbow_8"], models["surrogate_finetuned_elbow_8"]
    windows = ident["fit_on"]["windows"]
    assert ident["fit_on"]["fit_on"] == "impacts" and ident["identification"]["identified_on"] == len(windows) >= 6
    assert set(windows) | set(ident["fit_on"]["without_window"]) == set(fitted["fit"]["episodes"])
    assert all(frames == 7 + 15 + 1 for _, frames in windows.values())
    assert fitted["fit_on"] == {"fit_on": "whole"}
    _check_frames(led)


def _check_frames(led: dict) -> None:
    """``eval/frame_check.py`` on the run's ledger: every row rebuilt from it scores what the ledger says in the
    recording's own frame (a fine-tuned law to 1e-6: its values went through JSON); the surrogate rows, and an
    ensemble of elliptic cones, score the same in a frame turned by 45 deg."""
    rows = {r["name"]: r for r in eval_script("frame_check").check(led, [45.0])}
    assert set(rows) == set(led["models"])
    for name, r in rows.items():
        assert r["by_angle"][0.0] == pytest.approx(r["ledger"], rel=1e-6), name
    for name in ("surrogate", "surrogate_finetuned_elbow_8", "analytic_randomized"):
        assert rows[name]["range_max"] < 1e-6, name
    nominal = rows["analytic_nominal"]  # MuJoCo's default, pyramidal cone: anisotropic in the floor's plane
    assert nominal["cone"] == "pyramidal" and nominal["range_max"] > 0.5


def _check_finetuned(led: dict) -> None:
    """The small suite's fine-tuned row: fitted on 8 training tosses (never a test one), from the release's law, never
    worse than it on those tosses, inside the law's ranges, paired against MuJoCo identified on the same 8."""
    ft = led["models"]["surrogate_finetuned_elbow_8"]
    release = json.loads((CKPT / "card.json").read_text())["model"]["hparams"]
    assert ft["method"] == "gradient" and "by gradient through the articulated twin" in ft["description"]
    fit = ft["fit"]
    assert len(fit["history"]) == 1 and fit["loss"] == min([fit["start_loss"], fit["history"][0][1]])
    assert ft["train_size"] == 8 and len(set(fit["episodes"])) == 8
    assert not set(fit["episodes"]) & set(led["split"]["test"]) and ft["test_episodes_seen_in_training"] == []
    assert fit["start"] == pytest.approx({k: release["prior"][k.split("[")[0]] for k in fit["keys"]})  # "stiffness[surface]"
    assert fit["loss"] <= fit["start_loss"]
    assert range_problems(ft["law"], mu_max=release["mu_max"]) == []
    assert all(lo <= fit["fitted"][k] <= hi for k, (lo, hi) in fit["bounds"].items())
    assert ft["overall"]["episodes"] == 6 and ft["stepper"]["fallbacks"] == 0
    paired = {(d["vs"], d["metric"]) for d in ft["paired"] if d["n"] == 6}
    assert {(v, k) for v in ("analytic_identified_elbow_8", "surrogate") for k in ("pos_pct_size", "rot_deg", "joint_deg")} <= paired


@needs_shared("contactnets_elbow")
def test_elbow_gradient_fine_tune_starts_at_the_release_and_keeps_its_best_step(tmp_path):
    eps = _three_tosses(tmp_path)
    release, _ = load_checkpoint(CKPT)
    keys = refit_keys(release)
    before = law_values(release, keys)
    fitted, info = finetune_law(release, eps, substeps=4, init_frames=5, steps=3, lr=0.2, window=25, batch=2, seed=0)
    assert law_values(release, keys) == before and info["start"] == before  # the release itself is untouched
    assert len(info["history"]) == 3 and not info["network"]
    whole = [info["start_loss"]] + [h[1] for h in info["history"]]
    assert info["loss"] == min(whole) and info["best_step"] == whole.index(min(whole))
    # descent: a step beats the release on its training tosses (measured 1.386 -> 1.276), so it moved the law
    assert info["best_step"] > 0 and info["loss"] < 0.98 * info["start_loss"] and info["fitted"] != before
    assert all(lo <= info["fitted"][k] * (1 + 1e-6) and info["fitted"][k] <= hi * (1 + 1e-6)
               for k, (lo, hi) in info["bounds"].items())
    check_model(fitted)
    scene = object_scene(eps[0], substeps=4, mode="external", margin=DEFAULT_MARGIN)
    tosses = TossSet.from_episodes(eps, substeps=4, k=5)
    assert toss_loss(fitted, scene, tosses, 0.1) == pytest.approx(info["loss"], rel=1e-9)


@needs_shared("contactnets_elbow")
def test_elbow_gradient_fine_tune_trains_a_releases_network_too(tmp_path):
    from surrogate.model.contact_law import ContactLawGNN

    from .test_contact_law import _perturbed

    eps = _three_tosses(tmp_path)
    release, _ = load_checkpoint(CKPT)
    net = _perturbed(ContactLawGNN(prior=release.prior("surface").to_json(), corrections=True, friction_iterations=4,
                                   stribeck=True), scale=0.5)
    before = [p.detach().clone() for p in net.correction_parameters()]
    fitted, info = finetune_law(net, eps, substeps=4, init_frames=5, steps=1, lr=0.2, lr_network=0.05, window=25,
                                batch=2, seed=0)
    assert info["network"] and "network 0.05" in info["optimizer"]
    moved = [not torch.equal(a, b.detach()) for a, b in zip(before, fitted.correction_parameters())]
    assert any(moved) == (info["best_step"] == 1)  # the weights moved exactly when the step was kept
    assert all(p.grad is None for p in fitted.parameters())  # no stale gradient in what is returned
    assert [p.requires_grad for p in fitted.parameters()] == [p.requires_grad for p in net.parameters()]


def _three_tosses(tmp_path):
    src = tmp_path / "raw"
    src.mkdir()
    for n in ("0", "9", "18"):
        shutil.copy(ELBOW / f"{n}.pt", src / f"{n}.pt")
    assert main(["import", "contactnets", str(src), "--urdf", str(ELBOW / "contactnets_elbow.urdf"), "--out",
                 str(tmp_path / "ds"), "--quiet"]) == 0
    return read_dataset(tmp_path / "ds").episodes


@needs_shared("contactnets_elbow")
@needs_shared("contactnets_cube")
def test_elbow_real_takes_other_elbow_test_data(tmp_path):
    src = tmp_path / "other"
    src.mkdir()
    # four tosses of the small suite's held-out split, and one of its pool, which the few-shot rows train on
    for n in ("18", "36", "72", "90", "0"):
        shutil.copy(ELBOW / f"{n}.pt", src / f"{n}.pt")
    ds = tmp_path / "other_ds"
    assert main(["import", "contactnets", str(src), "--urdf", str(ELBOW / "contactnets_elbow.urdf"), "--out", str(ds),
                 "--quiet"]) == 0
    out = tmp_path / "bench"
    assert main(["bench", "elbow-real-small", "--out", str(out), "--test-data", str(ds), "--quiet"]) == 0
    led = json.loads((out / "ledger.json").read_text())
    assert led["data"]["test_data"]["episodes"] == 4 and "source" not in led["data"]["test_data"]
    (seen,) = led["data"]["test_data"]["left_out"]  # the pool's toss: left out of every row's test, and named
    assert seen["episode"] == "0" and "few-shot rows are identified and fine-tuned on" in seen["reason"]
    few = led["models"]["analytic_identified_elbow_8"]  # few-shot rows on other test data: trained on the pool
    assert few["overall"]["episodes"] == 4 and few["train_size"] == 8
    # the raw tosses themselves are taken too (imported with the suite's URDF), and score the same; what they lose
    # is named in the ledger and the report: a file of the wrong shape (skipped at import), a toss too short to score
    toss = torch.load(ELBOW / "36.pt", weights_only=True)
    torch.save(toss[:, :14].clone(), src / "900.pt")
    torch.save(toss[:3].clone(), src / "901.pt")
    assert main(["bench", "elbow-real-small", "--out", str(tmp_path / "raw"), "--test-data", str(src), "--quiet",
                 "--set", "few_shot.sizes=[]"]) == 0
    raw = json.loads((tmp_path / "raw" / "ledger.json").read_text())
    assert raw["data"]["test_data"]["source"] == str(src)
    assert [(Path(s["file"]).name, s["field"]) for s in raw["data"]["test_data"]["skipped"]] == [("900.pt", "tensor")]
    assert raw["data"]["test_data"]["left_out"] == [{"episode": "901", "reason": "3 frames, fewer than data.min_frames=20"},
                                                    seen]
    assert "4 episodes scored" in (report := (tmp_path / "raw" / "report.md").read_text()) and "not scored: 3" in report
    assert raw["models"]["analytic_identified"]["overall"] == led["models"]["analytic_identified"]["overall"]
    assert led["models"]["analytic_identified"]["overall"]["episodes"] == 4
    assert led["models"]["surrogate"]["status"] == "not evaluated"  # no --checkpoint
    assert not [k for k in raw["models"] if k.startswith("analytic_identified_elbow")]  # few_shot.sizes=[]
    assert "floor_warnings" not in raw["data"]  # the shared URDF describes the tossed elbow
    assert "no_free_flight" not in raw["data"]  # every shared toss is in free flight within the frames searched
    # the same tosses imported with a URDF whose hinge turns the other way: scored as given, and warned about
    flipped = tmp_path / "flipped.urdf"
    flipped.write_text((ELBOW / "contactnets_elbow.urdf").read_text().replace('<axis xyz="0 1 0" />',
                                                                              '<axis xyz="0 -1 0" />'))
    assert main(["import", "contactnets", str(src), "--urdf", str(flipped), "--out", str(tmp_path / "flipped_ds"),
                 "--quiet"]) == 0
    assert main(["bench", "elbow-real-small", "--out", str(tmp_path / "flipped"), "--test-data",
                 str(tmp_path / "flipped_ds"), "--quiet", "--set", "few_shot.sizes=[]"]) == 0
    (warning,) = json.loads((tmp_path / "flipped" / "ledger.json").read_text())["data"]["floor_warnings"]
    assert warning.startswith("[flipped] link 'elbow_2' sinks more than 20 mm below the floor in 2 of 4 tosses")
    assert warning in (tmp_path / "flipped" / "report.md").read_text()
    # a rigid (cube) dataset is refused, naming it
    assert main(["import", "contactnets", str(SHARED / "contactnets_cube"), "--out", str(tmp_path / "cube"), "--quiet"]) == 0
    assert main(["bench", "elbow-real-small", "--out", str(tmp_path / "b2"), "--test-data", str(tmp_path / "cube"),
                 "--quiet"]) != 0
    # test data made only of the pool's tosses leaves nothing to test: refused before any baseline runs
    pool_only = tmp_path / "pool_only"
    pool_only.mkdir()
    shutil.copy(ELBOW / "0.pt", pool_only / "0.pt")
    assert main(["bench", "elbow-real-small", "--out", str(tmp_path / "b3"), "--test-data", str(pool_only),
                 "--quiet"]) != 0
    assert not (tmp_path / "b3" / "ledger.json").exists()


FINE_TUNE_ON_8 = """
import json, sys, torch
from surrogate.bench.elbow_fewshot import fit_on_tosses, surrogate_settings
from surrogate.bench.elbow_real import from_flight_start
from surrogate.bench.run import CACHE_DIR
from surrogate.bench.toss_data import load_tosses
from surrogate.model.checkpoint import load_checkpoint
from surrogate.splits import suite_split
from surrogate.suites import load_suite

cfg = load_suite("elbow-real")
ds = load_tosses(cfg["data"]["source"], cache_dir=CACHE_DIR, urdf=cfg["data"]["urdf"], progress=False)
eps, sp = suite_split(ds.episodes, cfg["data"], [])
by_id = {e.episode_id: e for e in eps}
train = from_flight_start([by_id[i] for i in sp["pool"][:8]], cfg)
release, card = load_checkpoint(sys.argv[1])
sim = cfg["simulation"]
_, info, _ = fit_on_tosses(release, train, {**surrogate_settings(cfg), "steps": 2}, substeps=sim["substeps"],
                           init_frames=sim["init_frames"], margin=float(card["data"]["margin_m"]), seed=8)
print(json.dumps({"cpu": torch.backends.cpu.get_cpu_capability(), "fitted": info["fitted"],
                  "history": info["history"]}))
"""


@needs_shared("contactnets_elbow")
def test_the_elbow_fine_tune_fits_the_same_law_with_another_cpus_vector_kernels():
    """torch's vector kernels (``ATEN_CPU_CAPABILITY``: its portable ones against the CPU's own, AVX2 or AVX-512) give
    the twin's gradient through the impacts other 6th-7th digits; the fine-tune's grid (``LOG_GRID``) keeps the
    fitted law and every step's whole-toss loss equal to the bit (without it the stiffness after two steps of the
    suite's fine-tune on 8 tosses differs in its 6th digit, and the kept step can differ)."""
    import os
    import platform
    import subprocess
    import sys

    eval_script("elbow_sensitivity").suite_tosses("elbow-real", "pool", 1)  # the import cached before the two runs
    runs = [subprocess.Popen([sys.executable, "-c", FINE_TUNE_ON_8, str(CKPT)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, **cpu}) for cpu in ({"ATEN_CPU_CAPABILITY": "default"}, {})]
    out = [json.loads(r.communicate(timeout=600)[0].strip().splitlines()[-1]) for r in runs]
    assert all(r.returncode == 0 for r in runs)
    if platform.machine().lower() in ("x86_64", "amd64"):  # the premise: two sets of kernels were compared
        assert out[0]["cpu"] == "DEFAULT" and out[1]["cpu"] != "DEFAULT", [o["cpu"] for o in out]
    assert out[0]["fitted"] == out[1]["fitted"]
    assert [h[1] for h in out[0]["history"]] == [h[1] for h in out[1]["history"]]
