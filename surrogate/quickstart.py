"""The main job on the embedded default: every stage that exists, end to end, small.

Stages (each prints what it did, its wall time and its CPU time; the whole run writes ``OUT/summary.json``, the stage
times in ``stage_wall_s`` and ``stage_cpu_s``):
  1. import the real ContactNets cube tosses (if the sample data is present),
  2. load the object splits (train / held-out families, YCB meshes if present),
  3. build a scene for one object of each family with each hand and check that a
     passive drop settles under MuJoCo's analytic contact,
  4. generate grasp captures of training-split objects with the capture rig,
  5. train the contact surrogate on them (``surrogate train``, in this process: the release's config,
     fewer epochs),
  6. run the small ``rig-grasp`` benchmark: that surrogate against analytic MuJoCo (nominal,
     identified on the same captures, randomized) on held-out families and mesh files,
  7. run the small ``cube-real`` benchmark: analytic baselines against the released cube-toss
     surrogate on the real tosses (with two workers or more, in a process of its own beside stages 5-6,
     ``background``: training uses one core; its output in ``OUT/bench_cube_real.log``);
and prints the two ledgers' verdicts.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import mujoco
import numpy as np

from .atomic import write_json_atomic
from .hand_names import CODE_HANDS
from .paths import shared_data_dir

SETTLE_SECONDS = 1.5
JOB_SPLITS = ("train", "val", "heldout")  # the procedural splits the job's stages use (rig captures, test sets, scenes)
JOB_FLOOR = ("floor.redraws=1",)  # the rig-grasp floor's redraws in the job: rig_exact and one redraw (no medoid)


def _cpu_s(skip=()) -> float:
    """CPU seconds (user + system) of this process and of every process it started: the finished ones it waited for
    and, on Linux, the live ones with what they waited for (``/proc``), less the live ones in ``skip`` (a job run
    beside the stages, counted by the stage that waits for it). A stage's cost that other jobs on a shared machine
    disturb much less than its wall time. The live ones matter: the rig's pool workers are children of a forkserver
    that lives as long as this process, so their time never reaches this process's own accounts."""
    try:
        import resource
    except ImportError:  # Windows: this process only
        return time.process_time()
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime + _live_descendants_s(set(skip))


def _live_descendants_s(skip: set) -> float:
    """CPU seconds of this process's live descendants, each with the children it has waited for (``/proc/PID/stat``:
    utime, stime, cutime, cstime), leaving out the processes in ``skip`` and theirs; 0 where there is no ``/proc``."""
    children: dict[int, list[tuple[int, int]]] = {}
    try:
        pids = [d for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:  # it exited meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # from field 3 (state) on; field 4 is the parent
        children.setdefault(int(fields[1]), []).append((int(pid), sum(int(x) for x in fields[11:15])))
    ticks, todo = 0, [os.getpid()]
    while todo:
        for pid, t in children.get(todo.pop(), []):
            if pid in skip:
                continue
            ticks += t
            todo.append(pid)
    return ticks / os.sysconf("SC_CLK_TCK")


def _stage(title: str):
    print(f"\n== {title}", flush=True)


def import_tosses(out: Path) -> dict:
    from .importers.contactnets import import_contactnets
    from .inspect import summarize

    src = shared_data_dir() / "contactnets_cube"
    if not src.exists():
        print(f"sample tosses not found at {src}; set SURROGATE_DATA or run "
              "`surrogate import contactnets <folder|archive|URL of the upstream repo> --out DATASET`")
        return {"skipped": f"{src} absent"}
    report = import_contactnets(src, out / "contactnets_cube", overwrite=True)
    print(report.summary())
    s = summarize(out / "contactnets_cube")
    rest = s["rest_height_m"]
    print(f"{s['episodes']} real tosses at {s['rate_hz']:.0f} Hz; cube rests {rest['median']*1000:.1f} mm above the ground "
          f"(half-width 52.4 mm)")
    return {"episodes": s["episodes"], "rate_hz": s["rate_hz"], "rest_height_m": rest["median"], "skipped": len(s["skipped"])}


def list_objects() -> dict:
    """Every configured split: its objects and families; the sizes of those the job uses (``JOB_SPLITS`` and the
    mesh folders), the others counted from their configuration (building 3,700 procedural objects took 14 s)."""
    from .objects import load_split, split_names, split_spec

    out = {}
    for name in split_names():
        spec = split_spec(name)
        n = spec.procedural_count
        if spec.folder is None and n is not None and name not in JOB_SPLITS:
            print(f"split {name:8s} {n:3d} objects, families {', '.join(sorted(spec.families))} (not used here)")
            out[name] = {"objects": n, "families": sorted(spec.families)}
            continue
        try:
            objs = load_split(name)
        except Exception as e:  # a folder split whose data is absent
            print(f"split {name}: unavailable ({e})")
            continue
        fams = sorted({o.family for o in objs})
        sizes = [o.size for o in objs]
        print(f"split {name:8s} {len(objs):3d} objects, families {', '.join(fams)}; size {min(sizes)*100:.1f}-{max(sizes)*100:.1f} cm")
        out[name] = {"objects": len(objs), "families": fams}
    return out


def drop_settles(obj, hand: str) -> dict:
    """Drop the object 2 cm onto the table in a scene with ``hand``; report how it settles."""
    from .scenes import build_scene

    scene = build_scene(obj, hand=hand, setting="table", object_quat="stable")
    m = scene.model
    d = scene.make_data(drop_height=0.02)
    for _ in range(int(SETTLE_SECONDS / m.opt.timestep)):
        mujoco.mj_step(m, d)
    a, v = scene.object_qpos_adr, scene.object_dof_adr
    lin = float(np.linalg.norm(d.qvel[v:v + 3]))
    ang = float(np.linalg.norm(d.qvel[v + 3:v + 6])) * obj.size
    z = float(d.qpos[a + 2] - scene.surface_z)
    ok = bool(np.isfinite(d.qpos).all() and lin < 5e-3 and ang < 5e-3 and z > 0)
    return {"object": obj.name, "hand": hand, "settled": ok, "speed_m_s": lin, "height_m": z,
            "owned_pairs": len(scene.owned_pairs), "actuators": int(m.nu)}


def check_scenes() -> list:
    from .objects import load_split

    seen, objs = set(), []
    for split in ("train", "heldout"):
        for o in load_split(split):
            if o.family not in seen:
                seen.add(o.family)
                objs.append(o)
    rows = []
    for o in objs:
        for hand in CODE_HANDS:
            r = drop_settles(o, hand)
            rows.append(r)
            if not r["settled"] or os.environ.get("SURROGATE_VERBOSE"):  # one line per scene only where it matters
                print(f"  {r['object']:22s} {hand:13s} {'settled' if r['settled'] else 'NOT SETTLED':11s} "
                      f"speed {r['speed_m_s']*1000:5.2f} mm/s  COM {r['height_m']*1000:5.1f} mm above table  "
                      f"{r['owned_pairs']:3d} owned pairs  {r['actuators']:2d} actuators")
    ok = sum(r["settled"] for r in rows)
    print(f"{ok}/{len(rows)} scenes settled ({len(objs)} families x 2 hands); fastest object still moving at "
          f"{max(r['speed_m_s'] for r in rows) * 1000:.2f} mm/s; per scene in summary.json (--verbose prints them)")
    return rows


def rig_captures(out: Path, episodes: int, workers: int) -> dict:
    from .inspect import summarize
    from .rig.generate import generate

    # None: the default rig, configs/rig/default.yaml (rig v3: its own pad and table laws, the fingertip effects)
    report = generate(None, objects="train", episodes=episodes, out=out / "rig_captures", workers=workers, seed=0,
                      overwrite=True)
    print(report.summary(rate=False))  # generate logs the rate line itself (shown by the CLI)
    s = summarize(out / "rig_captures")
    print(f"{s['episodes']} generated grasp episodes (capture rig, not hardware) at {s['rate_hz']:.0f} Hz; labels: "
          + ", ".join(f"{k} {v}/{s['episodes']}" for k, v in s["labels"].items()))
    return {"episodes": s["episodes"], "labels": s["labels"], "s_per_episode": report.elapsed_s / max(1, report.simulated)}


def train_surrogate(out: Path, epochs: int) -> dict:
    """Train the rig surrogate on the captures of stage 4 (``surrogate train`` with the release's packaged config,
    shortened: 24 training and 8 validation episodes, ``epochs`` epochs of the prior law, one of the network's
    corrections). Runs in this process (the package's training entry point; torch's thread count is restored)."""
    import torch

    from .training.config import load_config
    from .training.quiet import quiet_lightning
    from .training.run import fit

    ckpt = out / "checkpoint_rig"
    sets = [f"data.root={out / 'rig_captures'}", f"out_dir={out / 'train_rig'}", f"export.dir={ckpt}",
            f"stages.prior.epochs={epochs}", f"stages.corrections.epochs={min(epochs, 1)}", "data.max_train_episodes=24",
            "data.max_val_episodes=8", "stages.closed_loop.episodes=4", "stages.closed_loop.friction_scales=[1.0, 0.63, 0.4]",
            "trainer.enable_progress_bar=false"]
    print("surrogate train --config rig_default " + " ".join(f"--set {s}" for s in sets), flush=True)
    t0 = time.time()
    threads = torch.get_num_threads()
    try:
        with quiet_lightning():
            fit(load_config("rig_default", sets))
    finally:
        torch.set_num_threads(threads)
    card = json.loads((ckpt / "card.json").read_text())
    met = card["training"]["metrics"]
    rel = met["release"]
    print(f"trained in {time.time() - t0:.0f} s: {epochs} prior epochs; released {rel['structure']}, whole validation "
          f"episodes {rel['pos_pct_mean']:.1f} % of size / {rel['rot_deg_mean']:.1f} deg; checkpoint {ckpt}")
    return {"checkpoint": str(ckpt), "wall_s": time.time() - t0, "epochs": epochs, "structure": rel["structure"],
            "val_pos_pct": rel["pos_pct_mean"], "val_rot_deg": rel["rot_deg_mean"]}


def _bench(suite: str, out: Path, checkpoint, overrides, workers: int) -> dict:
    """One suite; with ``workers`` > 1 its tasks on that many local processes (``--backend process``: the same ledger;
    the main job's rig-grasp suite took 628 s on two processes against 878 s in this process)."""
    from .bench.run import run_suite, summary_lines

    par = {"backend": "process", "workers": workers} if workers > 1 else {}
    ledger = run_suite(suite, out=out, checkpoint=checkpoint, overrides=list(overrides), cache_dir=out.parent / "cache",
                       **par)
    print("\n".join(summary_lines(ledger)))
    return {"verdict": ledger["result"]["verdict"], "detail": ledger["result"]["detail"], "report": str(out / "report.md"),
            "wall_s": ledger["wall_s"]}


def rig_benchmark(out: Path, checkpoint, overrides, workers: int) -> dict:
    """``rig-grasp-small`` on the checkpoint just trained, its floor shortened to one redraw of each test grasp
    (``JOB_FLOOR``; ``--rig-set floor.redraws=3`` gives the suite's own, whose three took 5 min of the job's 30 min of
    CPU); ``overrides`` after it."""
    return _bench("rig-grasp-small", out / "bench_rig_grasp", checkpoint, [*JOB_FLOOR, *overrides], workers)


def cube_job(out: str, overrides: list) -> dict:
    """``small_benchmark`` as a job run beside the rig stages (``background``; arguments as JSON; MuJoCo's warnings
    go where this process's do, ``SURROGATE_MUJOCO_LOG`` being inherited)."""
    return small_benchmark(Path(out), overrides)


def cube_joined(out: Path, job: dict) -> dict:
    """Stage 7 when its benchmark ran beside the rig stages: wait for it and print its verdict lines."""
    from . import background
    from .bench.run import summary_lines

    got = background.join(job)
    result = got["result"]
    result["wall_beside_s"] = round(got["wall_s"], 1)
    print(f"(ran beside stages 5-6 for {got['wall_s']:.0f} s; its output in {job['log']})")
    ledger = out / "bench_cube_real" / "ledger.json"
    if "verdict" in result and ledger.exists():
        print("\n".join(summary_lines(json.loads(ledger.read_text()))))
    return result


def small_benchmark(out: Path, overrides) -> dict:
    from .paths import release_checkpoint, shared_data_dir

    if not (shared_data_dir() / "contactnets_cube").exists():
        print("cube tosses absent: benchmark skipped")
        return {"skipped": "sample tosses absent"}
    ckpt = release_checkpoint("cube_tosses")
    # the tosses imported in stage 1 are the suite's data
    # in this process: its identification opens a pool per generation, which cost more than the processes saved
    # (measured in the main job: 213 s on two processes against 197 s here)
    return _bench("cube-real-small", out / "bench_cube_real", ckpt if ckpt.exists() else None,
                  [f"data.source={out / 'contactnets_cube'}", *overrides], 1)


MARKER = ".quickstart"  # in OUT: the folder is a main job's, whose stages replace their own folders in it


def claim_output(out: Path) -> None:
    """Make ``out`` the main job's (``atomic.claim_output``): its stages replace ``contactnets_cube``,
    ``rig_captures``, ``train_rig``..., which there could be a user's own."""
    from .atomic import claim_output as claim

    claim(out, marker=MARKER, command="surrogate quickstart", earlier=("summary.json",))


def quickstart(out: str | Path = "runs/quickstart", *, rig_episodes: int = 60, workers: int = 2, epochs: int = 1,
               bench_overrides=(), rig_bench_overrides=()) -> dict:
    from .bench.run import mujoco_log

    out = Path(out).resolve()
    claim_output(out)
    with mujoco_log(out):  # MuJoCo's warnings into OUT/mujoco.log, not the console and the current folder
        return _quickstart(out, rig_episodes=rig_episodes, workers=workers, epochs=epochs,
                           bench_overrides=bench_overrides, rig_bench_overrides=rig_bench_overrides)


def _quickstart(out: Path, *, rig_episodes, workers, epochs, bench_overrides, rig_bench_overrides) -> dict:
    from . import background

    t0 = time.time()
    summary = {"stage_wall_s": {}, "stage_cpu_s": {}}
    # With two workers or more, stage 7 runs beside stages 5-6 (``background``): it needs only stage 1's tosses, and
    # the training stage (one thread) leaves a core idle, which the rig stage before it does not (two workers).
    # Its CPU is counted by stage 7, which waits for it.
    beside = {}

    def cube():
        return cube_joined(out, beside.pop("job")) if beside else small_benchmark(out, bench_overrides)

    stages = (
        ("contactnets", "1/7 import the real ContactNets cube tosses", lambda: import_tosses(out)),
        ("objects", "2/7 objects: train and held-out families, mesh files", list_objects),
        ("scenes", "3/7 scenes: one object per family, both hands, passive drop under analytic contact", check_scenes),
        ("rig", "4/7 capture rig: grasp episodes of training-split objects, recorded with sensor noise",
         lambda: rig_captures(out, rig_episodes, workers)),
        ("train", "5/7 train the contact surrogate on those captures", lambda: train_surrogate(out, epochs)),
        ("bench_rig_grasp", "6/7 benchmark rig-grasp (small): held-out families and mesh files, analytic MuJoCo vs the "
         "surrogate just trained",
         lambda: rig_benchmark(out, summary["train"]["checkpoint"], rig_bench_overrides, workers)),
        ("bench_cube_real", "7/7 benchmark cube-real (small): real tosses, analytic MuJoCo vs the released cube surrogate",
         cube),
    )
    try:
        for key, title, run in stages:  # each stage's wall and CPU time printed and kept: where the minutes go
            if key == "train" and workers > 1:
                log = out / "bench_cube_real.log"
                beside["job"] = background.start("surrogate.quickstart:cube_job", {"out": str(out), "overrides":
                                                 list(bench_overrides)}, log=log, result=out / "bench_cube_real.json")
                print(f"\n(stage 7/7, benchmark cube-real (small), starts beside stages 5-6; its output in {log})",
                      flush=True)
            _stage(title)
            ts, cs = time.time(), _cpu_s([background.pid(j) for j in beside.values()])
            summary[key] = run()
            summary["stage_wall_s"][key] = round(time.time() - ts, 1)
            summary["stage_cpu_s"][key] = round(_cpu_s([background.pid(j) for j in beside.values()]) - cs, 1)
            print(f"({summary['stage_wall_s'][key]:.0f} s wall, {summary['stage_cpu_s'][key]:.0f} s CPU)", flush=True)
    finally:
        for job in beside.values():  # a stage failed before stage 7 waited for it
            background.stop(job)
    rows = summary["scenes"]
    summary["wall_s"] = time.time() - t0
    summary["cpu_s"] = round(sum(summary["stage_cpu_s"].values()), 1)
    write_json_atomic(out / "summary.json", summary)
    settled = sum(r["settled"] for r in rows)
    print("\n== ledger summary")
    for key in ("bench_rig_grasp", "bench_cube_real"):
        b = summary[key]
        if "verdict" in b:
            print(f"{key[6:]}: {b['verdict']}: {b['detail']}\n  report: {b['report']}")
    print(f"\nquickstart done in {summary['wall_s'] / 60:.1f} min ({summary['cpu_s'] / 60:.1f} min of CPU): {settled}/{len(rows)} "
          f"scenes settled; summary in {out / 'summary.json'}")
    return summary
