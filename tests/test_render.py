"""Videos (``surrogate render``, the suites' median / worst videos, Gymnasium's RecordVideo) and the
reports a reader trusts at a glance (small-suite titles, verdicts in words, the identification size
actually used, every horizon with error bars, the surrogate on the data-efficiency plot, the umask).

Rendering is real (``mujoco.Renderer`` with EGL on the CPU) and small: a few frames at 64 x 48.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from surrogate.bench import video as V
from surrogate.bench.ledger import metric_words, validate_ledger, write_ledger
from surrogate.bench.report import data_efficiency_figure, horizons_figure, write_report
from surrogate.cli import main
from surrogate.errors import ConfigError

from .conftest import needs_shared

CUBE_CKPT = "checkpoints/cube_tosses"
RIG_CKPT = "checkpoints/rig_default"
TINY_VIDEO = ["video.width=64", "video.height=48", "video.fps=8"]
TINY_CUBE = ["data.n_test=5", "data.train_sizes=[8]", "baselines.identified.sizes=[8]", "baselines.identified.maxiter=1",
             "baselines.identified.popsize=3", "baselines.identified.cones=[elliptic]", "baselines.randomized.n=2"]


def _frames(path: Path):
    import imageio.v2 as imageio

    r = imageio.get_reader(path)
    try:
        return [f for f in r]
    finally:
        r.close()


@pytest.fixture(scope="module")
def cube_run(tmp_path_factory):
    """A small cube-real-small run with the released cube surrogate, videos at 64 x 48 (tests using it need the shared data)."""
    from surrogate.bench.run import run_suite

    base = tmp_path_factory.mktemp("cube")
    ledger = run_suite("cube-real-small", out=base / "report", checkpoint=CUBE_CKPT, overrides=TINY_CUBE + TINY_VIDEO,
                       progress=False, cache_dir=base / "cache")
    return ledger, base / "report"


# ----------------------------------------------------------------------------- picking episodes

def _ledger(rows, *, target=None, suite="rig-grasp"):
    return {"suite": suite, "split": {"target_sets": target} if target else {},
            "models": {"surrogate": {"per_episode": rows}}}


def test_median_and_worst_are_picked_by_the_ledgers_pose_errors():
    rows = [{"id": f"held/e{i}", "set": "held", "pos_pct_size": v} for i, v in enumerate([5.0, 1.0, 9.0, 3.0])]
    rows.append({"id": "train/e0", "set": "train", "pos_pct_size": 99.0})  # not an acceptance set: not ranked
    led = _ledger(rows, target=["held"])
    assert V.pick_episode(led, which="median") == {"key": "held/e3", "which": "median", "model": "surrogate", "pos_pct_size": 3.0}
    assert V.pick_episode(led, which="worst")["key"] == "held/e2"
    assert V.pick_episode(led, episode="e1")["key"] == "held/e1"  # a bare id unique across the sets
    assert V.pick_episode(led, episode="train/e0")["pos_pct_size"] == 99.0
    with pytest.raises(ConfigError, match="not one of its test episodes.*held/e0"):
        V.pick_episode(led, episode="nope")
    led["models"]["surrogate"]["per_episode"].append({"id": "train/e1", "set": "train", "pos_pct_size": 2.0})
    with pytest.raises(ConfigError, match="ambiguous"):
        V.pick_episode(led, episode="e1")
    with pytest.raises(ConfigError, match="exactly one"):
        V.pick_episode(led)
    # without a surrogate the identified baseline's errors rank the episodes
    led = {"suite": "cube-real", "models": {"surrogate": {"status": "not evaluated"},
                                            "analytic_identified": {"per_episode": [{"id": "7", "pos_pct_size": 4.0}]}}}
    assert V.pick_episode(led, which="worst")["model"] == "analytic_identified"


def test_metric_keys_read_as_words():
    assert metric_words("pos_pct_size") == "position error, % of object size"
    assert metric_words("rot_deg") == "rotation error, deg"
    assert metric_words("pos_pct_size@1s") == "position error 1 s after the close phase starts, % of object size"


# ----------------------------------------------------------------------------- suite videos and reports

@needs_shared("contactnets_cube")
def test_suite_report_links_videos_of_its_median_and_worst_episode(cube_run):
    ledger, out = cube_run
    validate_ledger(json.loads((out / "ledger.json").read_text()))
    vids = ledger["videos"]["videos"]
    per = sorted(ledger["models"]["surrogate"]["per_episode"], key=lambda r: (r["pos_pct_size"], r["id"]))
    assert [v["which"] for v in vids] == ["median", "worst"]
    assert vids[0]["episode"] == per[(len(per) - 1) // 2]["id"] and vids[1]["episode"] == per[-1]["id"]
    report = (out / "report.md").read_text()
    for v in vids:
        assert f"]({v['video']})" in report and f"]({v['still']})" in report
        frames = _frames(out / v["video"])
        # 64 x 48 panels, three of them (recorded / analytic / surrogate) under the title strip; 8 fps at 0.25 speed
        assert frames[0].shape == (V.HEADER_PX + 48, 3 * 64, 3)
        assert len(frames) == v["frames"] > 3
        assert (out / v["still"]).stat().st_size > 0
        # the surrogate's panel replays the suite's rollout: its mean error is the ledger's figure for that episode
        assert v["panels"]["surrogate"] == pytest.approx(v["ledger_pos_pct_size"], rel=1e-9)


@needs_shared("contactnets_cube")
def test_report_titles_small_suites_states_the_identification_used_and_words_its_verdict(cube_run):
    ledger, out = cube_run
    report = (out / "report.md").read_text()
    assert report.splitlines()[0] == "# Transfer report: cube-real-small (small run of cube-real)"
    assert "**A small run.**" in report and ledger["suite_name"] == "cube-real-small" and ledger["suite"] == "cube-real"
    # identified on the suite's 8 and on (a subsample of) the surrogate's own 64, the verdict's comparison
    assert "identified on all 8, 32 of 64 training episodes" in ledger["hypothesis"]
    result = next(line for line in report.splitlines() if line.startswith("**Result"))
    targets = [line for line in report.splitlines() if line.startswith("- target")]
    assert targets and "position error, % of object size" in result
    for line in [result, *targets, *(x for x in report.splitlines() if x.startswith("suite "))]:
        assert "pos_pct_size" not in line and "rot_deg" not in line, line


@needs_shared("contactnets_cube")
def test_plots_show_every_horizon_some_episode_lasts_to_with_error_bars_and_the_given_surrogate(cube_run):
    ledger, _ = cube_run
    fig = horizons_figure(ledger)
    ax = fig.axes[0]
    horizons = [float(h) for h in ledger["config"]["metrics"]["horizons_s"]
                if ledger["models"]["surrogate"]["overall"]["horizons"]["pos_pct_size"][f"{float(h):g}"]["n"]]
    assert [float(x) for x in ax.get_xticks()] == pytest.approx(sorted(horizons))  # those some toss lasts to
    from matplotlib.container import ErrorbarContainer

    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert {c.get_label() for c in bars} == {"analytic_nominal", "analytic_randomized", "analytic_identified", "surrogate"}
    fig = data_efficiency_figure(ledger)
    lines = {c.get_label(): c for c in fig.axes[0].containers if isinstance(c, ErrorbarContainer)}
    assert "surrogate" in lines  # the --checkpoint model, placed at the size its card was trained on
    assert list(lines["surrogate"].lines[0].get_xdata()) == pytest.approx([64], rel=0.05)  # dodged a little
    assert list(lines["analytic_identified"].lines[0].get_xdata()) == pytest.approx([8, 64], rel=0.05)


@needs_shared("contactnets_cube")
@pytest.mark.parametrize("mask", [0o027, 0o002])
def test_ledger_report_plots_and_videos_get_the_users_umask(cube_run, tmp_path, mask):
    ledger, out = cube_run
    old = os.umask(mask)
    try:
        write_ledger(ledger, tmp_path)
        write_report(ledger, tmp_path)
        V.write_video(np.zeros((2, 16, 16, 3), np.uint8), tmp_path / "v.mp4", fps=4)
        V.write_still(np.zeros((16, 16, 3), np.uint8), tmp_path / "s.png")
    finally:
        os.umask(old)
    files = ["ledger.json", "report.md", "horizons.png", "data_efficiency.png", "v.mp4", "s.png"]
    for name in files:
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~mask, name
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary files left


@needs_shared("contactnets_cube")
def test_videos_off_and_rendering_unavailable_are_said_in_the_report(cube_run, tmp_path):
    ledger, _ = cube_run
    led = dict(ledger)
    led["videos"] = V.suite_videos(led, tmp_path, settings={"enabled": False})
    write_report(led, tmp_path)
    assert "Videos not rendered: disabled (--no-video" in (tmp_path / "report.md").read_text()
    assert not (tmp_path / "videos").exists()
    # A process where MuJoCo has no OpenGL (MUJOCO_GL=disable): the suite's videos are skipped, saying why.
    (tmp_path / "ledger.json").write_text(json.dumps(ledger))
    code = ("import json,sys; from surrogate.bench.video import suite_videos; "
            "print(json.dumps(suite_videos(json.load(open(sys.argv[1])), sys.argv[2])))")
    env = {**os.environ, "MUJOCO_GL": "disable"}
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "ledger.json"), str(tmp_path / "x")], env=env,
                       capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[1])
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert "MuJoCo cannot render here" in res["skipped"] and "MUJOCO_GL" in res["skipped"]
    assert not (tmp_path / "x" / "videos").exists()


# ----------------------------------------------------------------------------- the command

@needs_shared("contactnets_cube")
def test_render_command_writes_mp4_gif_and_png_of_a_named_episode(cube_run, tmp_path, capsys):
    ledger, out = cube_run
    eid = ledger["models"]["surrogate"]["per_episode"][0]["id"]
    args = ["render", "--ledger", str(out), "--episode", eid, "--out", str(tmp_path / "e.mp4"), "--still",
            str(tmp_path / "e.png"), "--gif", str(tmp_path / "e.gif"), "--width", "64", "--height", "48", "--fps", "10",
            "--max-seconds", "0.3", "--json"]
    assert main(args) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["episode"] == eid and res["frames"] == 4  # 0.3 s at 10 fps: frames at 0, 0.1, 0.2, 0.3 s
    assert res["panels"]["surrogate"] == pytest.approx(ledger["models"]["surrogate"]["per_episode"][0]["pos_pct_size"])
    assert res["panels"]["analytic (identified)"] == pytest.approx(
        next(r for r in ledger["models"]["analytic_identified"]["per_episode"] if r["id"] == eid)["pos_pct_size"])
    assert len(_frames(tmp_path / "e.mp4")) == 4
    from PIL import Image

    assert Image.open(tmp_path / "e.png").size == (3 * 64, V.HEADER_PX + 48)
    assert Image.open(tmp_path / "e.gif").n_frames == 4
    # an existing output is not replaced without --overwrite; an unknown episode names the ledger's episodes
    assert main(args) == 2 and "--overwrite" in capsys.readouterr().err
    assert main(args[:4] + ["nope", "--out", str(tmp_path / "n.mp4")]) == 2
    assert "episode 'nope' is not one of its test episodes" in capsys.readouterr().err
    assert not (tmp_path / "n.mp4").exists()


@needs_shared("contactnets_cube")
def test_render_command_from_a_suite_and_an_episode_id(cube_run, tmp_path, capsys):
    ledger, out = cube_run
    eid = ledger["split"]["test"][0]
    cache = Path(ledger["data"]["path"]).parent
    clip = V.benchmark_clip(V.suite_ledger("cube-real-small", cache_dir=cache), episode=eid, checkpoint=CUBE_CKPT)
    assert [p.label for p in clip.panels] == ["recorded", "analytic (nominal)", "surrogate"]
    s_err = next(r for r in ledger["models"]["surrogate"]["per_episode"] if r["id"] == eid)["pos_pct_size"]
    n_err = next(r for r in ledger["models"]["analytic_nominal"]["per_episode"] if r["id"] == eid)["pos_pct_size"]
    assert clip.info["panels"] == pytest.approx({"analytic (nominal)": n_err, "surrogate": s_err})
    assert main(["render", "--suite", "cube-real-small", "--which", "median", "--out", str(tmp_path / "x.mp4")]) == 2
    assert "--which needs a ledger" in capsys.readouterr().err


def test_env_rollout_clip_shows_analytic_and_surrogate(tmp_path):
    clip = V.env_clip("ContactSurrogate/GripperGrasp-v0", checkpoint=RIG_CKPT, object="box", duration=0.4)
    assert [p.label for p in clip.panels] == ["analytic", "surrogate"]
    assert len(clip.times) == 21 and all(p.qpos.shape == (21, clip.model.nq) for p in clip.panels)  # 0.4 s at 50 Hz + reset
    frames = V.render_clip(clip, width=64, height=48, fps=10)
    assert frames.shape == (5, V.HEADER_PX + 48, 2 * 64, 3) and frames[:, V.HEADER_PX:].std() > 1  # a scene, not blank
    V.write_video(frames, tmp_path / "env.gif", fps=10)
    assert (tmp_path / "env.gif").stat().st_size > 0
    with pytest.raises(ConfigError, match="unknown environment"):
        V.env_clip("ContactSurrogate/Nope-v0", checkpoint=RIG_CKPT)


def test_env_clip_of_an_object_asset_passes_no_seed_and_refuses_one():
    """The policy suite's videos give ``env_clip`` an ``ObjectAsset``: it passed its default seed too, which the
    environment ignored (and now refuses)."""
    from surrogate.objects import make_object

    asset = make_object("cylinder", 2)
    clip = V.env_clip("ContactSurrogate/GripperGrasp-v0", object=asset, duration=0.1, contacts=("analytic",))
    assert clip.info["object"] == asset.name and [p.label for p in clip.panels] == ["analytic"]
    with pytest.raises(ConfigError, match="object_seed seeds a procedural family"):
        V.env_clip("ContactSurrogate/GripperGrasp-v0", object=asset, object_seed=4, duration=0.1, contacts=("analytic",))


def test_render_env_without_a_checkpoint_shows_the_released_surrogate_beside_analytic(tmp_path, capsys):
    """`surrogate render --env ID` without --checkpoint: the surrogate panel is the release the envs load, not left
    out."""
    from surrogate.cli import main

    assert main(["render", "--env", "ContactSurrogate/GripperGrasp-v0", "--duration", "0.2", "--width", "32",
                 "--height", "24", "--fps", "5", "--out", str(tmp_path / "e.gif"), "--json", "--quiet"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert set(res["outcomes"]) == {"analytic", "surrogate"} and (tmp_path / "e.gif").stat().st_size > 0


def test_gymnasium_record_video_works_with_the_envs(tmp_path):
    """Gymnasium's own RecordVideo wrapper (its moviepy dependency is in the video and test extras)."""
    pytest.importorskip("moviepy", reason="moviepy (the video extra) is not installed: pip install 'contact-surrogate[video]'")
    import gymnasium as gym
    from gymnasium.wrappers import RecordVideo

    env = gym.make("surrogate.envs:ContactSurrogate/GripperGrasp-v0", render_mode="rgb_array", width=64, height=48,
                   max_episode_steps=6)
    env = RecordVideo(env, video_folder=str(tmp_path / "videos"), episode_trigger=lambda e: True, disable_logger=True)
    env.reset(seed=0)
    for _ in range(6):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            break
    env.close()
    vids = sorted((tmp_path / "videos").glob("*.mp4"))
    assert vids and len(_frames(vids[0])) >= 6
