"""The ``surrogate`` command: one entry point, one subcommand per job.

Subcommands import their modules lazily so that ``surrogate --help`` is instant and a
missing optional dependency only affects the subcommand that needs it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from pathlib import Path

from . import __version__, cli_args
from .cli_args import VERBOSE_HELP, add_verbose_everywhere, check_render, non_negative_int, positive_float
from .errors import SurrogateError
from .hand_names import GRASPING_HANDS, HANDS


def _cmd_import_contactnets(a):
    from .importers.contactnets import import_contactnets

    report = import_contactnets(a.src, a.out, overwrite=a.overwrite, progress=not a.quiet, urdf=a.urdf,
                                rate_hz=a.rate_hz)
    print(report.summary())


def _cmd_import_poses(a):
    from .importers.poses import import_poses

    report = import_poses(a.src, a.out, config=a.config, overrides=a.set or [], overwrite=a.overwrite, progress=not a.quiet)
    print(report.summary())


def _cmd_import_lerobot(a):
    from .capture.lerobot_import import load_mapping, read_lerobot
    from .importers.report import ImportReport

    report = ImportReport(out=Path(a.out))
    report.check_output(overwrite=a.overwrite)
    episodes, meta, skipped = read_lerobot(a.src, load_mapping(a.mapping))
    if isinstance(meta.hand, dict) and meta.hand.get("mjcf"):  # a robot its scenes are built with: checked first
        from .scenes.hand_model import load_hand_model

        load_hand_model(meta.hand, meta.robot_files)
    report.skipped = list(skipped)  # written with the dataset; with no episode left, each input's reason is listed
    print(report.write(episodes, meta, overwrite=a.overwrite).summary())


def _cmd_inspect(a):
    from .inspect import inspect

    print(inspect(a.dataset, as_json=a.json))


def _cmd_objects(a):
    from .objects import split_names
    from .rig.generate import load_objects  # a split's name or a folder of meshes/URDFs, as rig generate takes

    for name in [a.split] if a.split else split_names():
        objs = load_objects(name)[0]
        print(f"split '{name}': {len(objs)} objects")
        for o in objs:
            e = o.extents
            print(f"  {o.name:28s} {o.family:16s} {len(o.pieces):2d} pieces  {e[0]*100:5.1f} x {e[1]*100:5.1f} x {e[2]*100:5.1f} cm  {o.mass*1000:7.1f} g")


def _cmd_scene(a):
    from .objects import make_object
    from .rig.generate import load_objects  # a split's name or a folder of meshes/URDFs
    from .scenes import build_scene

    obj = make_object(a.family, a.seed) if a.family else load_objects(a.split)[0][0]
    scene = build_scene(obj, hand=a.hand, setting=a.setting)
    m = scene.model
    print(f"scene: object {obj.name} ({obj.family}), hand {a.hand}, setting {a.setting}")
    print(f"  bodies {m.nbody}, joints {m.njnt}, actuators {m.nu}, geoms {m.ngeom}, pairs {m.npair}")
    print(f"  owned pairs ({len(scene.owned_pairs)}): {', '.join(scene.owned_pairs[:8])}{' ...' if len(scene.owned_pairs) > 8 else ''}")
    if a.xml:
        Path(a.xml).write_text(scene.spec.to_xml())
        print(f"  MJCF written to {a.xml}")


def _cmd_bench(a):
    from .bench.run import run_suite, summary_lines

    ledger = run_suite(a.suite, out=a.out, checkpoint=a.checkpoint, test_data=a.test_data, overrides=a.set or [],
                       progress=not a.quiet, video=False if a.no_video else None, backend=a.backend, workers=a.workers,
                       ray_address=a.ray_address)
    print("\n".join(summary_lines(ledger)))
    print(f"ledger: {a.out}/ledger.json   report: {a.out}/report.md")


def _cmd_render(a):
    from .bench.video import render_command

    render_command(a)


def _lazy_run(module: str):
    """The subcommand whose ``run(args)`` is in ``module``, imported only when it runs."""
    def go(a):
        import importlib

        importlib.import_module(module, __package__).run(a)
    return go


def _cmd_quickstart(a):
    from .quickstart import quickstart

    quickstart(a.out, rig_episodes=a.rig_episodes, workers=a.workers, epochs=a.epochs,
               bench_overrides=a.set or [], rig_bench_overrides=a.rig_set or [])


def _cmd_rig_generate(a):
    from .rig.generate import generate

    report = generate(a.config, objects=a.objects, episodes=a.episodes, out=a.out, workers=a.workers, seed=a.seed,
                      backend=a.backend, overrides=a.set or [], hand=a.hand, progress=not a.quiet,
                      duration=a.duration, overwrite=a.overwrite)
    print(report.summary(rate=a.quiet))  # generate prints the rate itself unless quiet


def _cmd_rig_gap(a):
    from .bench.gap import HANDS, study
    from .bench.gap_report import write_study

    result = study(a.config, objects=a.objects, train_objects=a.train_objects, episodes=a.episodes,
                   train_episodes=a.train_episodes, hands=HANDS if a.hand == "both" else (a.hand,),
                   duration=a.duration, seed=a.seed, workers=a.workers, maxiter=a.maxiter, popsize=a.popsize,
                   only=a.only, work_dir=a.work_dir, progress=not a.quiet)
    path = write_study(result, a.out)
    print(path.read_text())


def build_parser() -> argparse.ArgumentParser:
    """The ``surrogate`` command line: every subcommand and its options.

    Long because: a declarative table of argparse calls, one block per subcommand (the commands' work is in
    the ``_cmd_*`` functions and the library); splitting it would only scatter the table.
    """
    p = argparse.ArgumentParser(prog="surrogate", description="Learned contact for MuJoCo: captures, surrogates, hybrid stepping, benchmarks.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}", help="print the version and exit")
    p.add_argument("--debug", action="store_true", help="on an error, show the traceback (default: one line)")
    p.add_argument("--verbose", action="store_true", help=VERBOSE_HELP + " (also after any command's name)")
    from .bench.speed import build_parser as speed_parser  # cheap: no MuJoCo, torch until a study runs
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    imp = sub.add_parser("import", help="convert recordings into the capture format").add_subparsers(dest="source", required=True)
    c = imp.add_parser("contactnets", help="the real ContactNets cube tosses (folder, upstream archive or URL)")
    c.add_argument("src", help="folder of N.pt tosses, the upstream repository archive (.zip/.tar.gz) or its URL")
    c.add_argument("--out", required=True, help="capture dataset directory to write")
    c.add_argument("--urdf", help="the tosses' URDF object, jointed (elbow) or rigid: dair_pll layout [T, 13 + 2J]")
    c.add_argument("--rate-hz", type=float, help="with --urdf: the tosses' frame rate (default 148, the DAIR Lab's)")
    c.set_defaults(func=_cmd_import_contactnets)
    c = imp.add_parser("poses", help="a folder of tracked object trajectories (CSV, NPZ, torch) + mesh and mass")
    c.add_argument("src", help="folder with one trajectory file per episode")
    c.add_argument("--out", required=True, help="capture dataset directory to write")
    c.add_argument("--config", help="YAML with columns, units, object and provenance (see docs/importers.md)")
    c.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config value, e.g. units.length=mm (repeatable)")
    c.set_defaults(func=_cmd_import_poses)
    c = imp.add_parser("lerobot", help="a LeRobot v3 dataset, given a YAML key mapping and scene description")
    c.add_argument("src", help="LeRobot v3 dataset folder (meta/info.json, data/, meta/episodes/)")
    c.add_argument("--mapping", required=True,
                   help="YAML: which key is the object pose, units, object, environment, provenance (see surrogate/capture/lerobot_import.py)")
    c.add_argument("--out", required=True, help="capture dataset directory to write")
    c.set_defaults(func=_cmd_import_lerobot)
    for sp in imp.choices.values():
        sp.add_argument("--overwrite", action="store_true", help="replace an existing dataset at --out")
        sp.add_argument("--quiet", action="store_true", help="no progress bar")

    # The capture rig: one subcommand per job in the `rig` group (add new ones beside `generate`).
    rig = sub.add_parser("rig", help="the capture rig (reference physics; stands in for hardware)").add_subparsers(
        dest="rig_command", required=True)
    c = rig.add_parser("generate", help="generate grasp episodes into a capture dataset (resumable)")
    c.add_argument("--config", default=None, help="rig config YAML (default configs/rig/default.yaml)")
    c.add_argument("--objects", required=True, help="object split name (see `surrogate objects`) or a folder of meshes/URDFs")
    c.add_argument("--episodes", type=int, required=True, help="number of episodes to generate")
    c.add_argument("--out", required=True, help="dataset directory; shards of an unfinished run live in <out>.parts")
    c.add_argument("--workers", type=int, default=1, help="parallel workers (0: run in this process; default 1)")
    c.add_argument("--seed", type=non_negative_int, default=0, help="run seed; episode i: SeedSequence(seed, i) (default 0)")
    c.add_argument("--backend", default="process", choices=["process", "ray"],
                   help="local processes or a local Ray instance (default process)")
    c.add_argument("--hand", default="parallel_jaw", choices=[*GRASPING_HANDS, "both"],
                   help="hand model (jaco: the Kinova hand, dm_control's assets); both alternates the first two and "
                        "writes one dataset per hand under --out (default parallel_jaw)")
    c.add_argument("--duration", type=positive_float, help="episode length in s (default: the config's script.duration)")
    c.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config value, e.g. recorder.rate_hz=200 (repeatable)")
    c.add_argument("--overwrite", action="store_true", help="replace an existing dataset at --out")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    c.set_defaults(func=_cmd_rig_generate)
    c = rig.add_parser("gap", help="identified MuJoCo vs the rig: residual against repeatability, each effect's share of it")
    c.add_argument("--config", default=None, help="rig config YAML (default configs/rig/default.yaml)")
    c.add_argument("--objects", default="heldout", help="test objects: split name or a folder of meshes/URDFs (default heldout)")
    c.add_argument("--train-objects", default="train", help="objects MuJoCo is identified on (default train)")
    c.add_argument("--episodes", type=int, default=6, help="test grasps per hand and variant (default 6)")
    c.add_argument("--train-episodes", type=int, default=3, help="identification grasps per hand and variant (default 3)")
    c.add_argument("--hand", default="both", choices=[*GRASPING_HANDS, "both"],
                   help="hands (both: the first two; default both)")
    c.add_argument("--duration", type=positive_float, default=4.0, help="grasp length in s (default 4.0)")
    c.add_argument("--seed", type=non_negative_int, default=0, help="run seed (default 0)")
    c.add_argument("--workers", type=int, default=1, help="generation workers; replays use one thread (default 1)")
    c.add_argument("--maxiter", type=int, default=3, help="differential-evolution generations per cone (default 3)")
    c.add_argument("--popsize", type=int, default=3, help="differential-evolution population size multiplier (default 3)")
    c.add_argument("--only", nargs="*", help="variants to run (all_on, without_<effect>); default all")
    c.add_argument("--work-dir", help="where the recorded variants are kept (default: a temporary folder)")
    c.add_argument("--out", required=True, help="folder for gap.json, gap.md and gap.png")
    c.add_argument("--quiet", action="store_true", help="no progress bars")
    c.set_defaults(func=_cmd_rig_gap)

    c = sub.add_parser("inspect", help="summarize a capture dataset")
    c.add_argument("dataset", help="capture dataset directory")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    c.set_defaults(func=_cmd_inspect)

    c = sub.add_parser("objects", help="list the objects of the configured splits")
    c.add_argument("--split", help="one split name or a folder of meshes/URDFs (default: every split)")
    c.set_defaults(func=_cmd_objects)

    c = sub.add_parser("scene", help="build a MuJoCo scene and print what it holds")
    c.add_argument("--family", help="procedural family (default: first object of --split)")
    c.add_argument("--seed", type=non_negative_int, default=0, help="seed of the procedural family (default 0)")
    c.add_argument("--split", default="train", help="split or objects folder: its first object (default train)")
    c.add_argument("--hand", default="parallel_jaw", choices=list(HANDS),
                   help="hand model, or none (default parallel_jaw)")
    c.add_argument("--setting", default="table", choices=["table", "ground"],
                   help="object on a table or on a ground plane (default table)")
    c.add_argument("--xml", help="also write the scene's MJCF here")
    c.set_defaults(func=_cmd_scene)

    c = sub.add_parser("bench", help="run a benchmark suite (configs/eval/<suite>.yaml) and write a transfer ledger")
    c.add_argument("suite", help="suite name (e.g. cube-real, cube-real-small) or a YAML path")
    c.add_argument("--checkpoint", help="surrogate checkpoint folder (weights.safetensors + card.json)")
    c.add_argument("--out", required=True, help="report folder: ledger.json, report.md, plots")
    c.add_argument("--test-data", action="extend", nargs="+", metavar="DATASET",
                   help="evaluate on these capture datasets instead of the suite's test episodes (several: repeat the "
                        "flag or list them; scored per dataset and per object)")
    c.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a suite value (repeatable)")
    c.add_argument("--backend", default="local", choices=["local", "process", "ray"],
                   help="run replays, rollouts and identification here, on --workers local processes or as Ray tasks; "
                        "the same ledger (default local)")
    c.add_argument("--ray-address", help="with --backend ray: the address of a running Ray cluster (default: start a local instance)")
    c.add_argument("--workers", type=int, help="with --backend process: worker processes; ray: CPUs of the local Ray "
                                               "instance (default: the suite's workers, else 2)")
    c.add_argument("--quiet", action="store_true", help="no progress bars")
    c.add_argument("--no-video", action="store_true",
                   help="do not render the videos of the median and worst test episode (report.md says so)")
    c.set_defaults(func=_cmd_bench)

    c = sub.add_parser("render", help="side-by-side MP4 (recorded / analytic / surrogate) of a benchmark episode or an env rollout")
    src = c.add_mutually_exclusive_group(required=True)
    src.add_argument("--ledger", help="ledger.json of a `surrogate bench` run (or its --out folder): render one of its test episodes")
    src.add_argument("--suite", help="a suite name or YAML (with --episode and --checkpoint): render a test episode without a ledger "
                                     "(the analytic panel is then nominal MuJoCo)")
    src.add_argument("--env", help="a Gymnasium id (ContactSurrogate/GripperGrasp-v0, ContactSurrogate/HandGrasp-v0, "
                                   "ContactSurrogate/JacoGrasp-v0): scripted-grasp rollouts, analytic / surrogate")
    pick = c.add_mutually_exclusive_group()
    pick.add_argument("--episode", help="the episode id (rig-grasp: SET/ID, or an ID unique across the test sets)")
    pick.add_argument("--which", choices=["median", "worst"],
                      help="the test episode of median or largest position error in the ledger (the surrogate's; "
                           "rig-grasp: among the acceptance sets)")
    c.add_argument("--checkpoint", help="surrogate checkpoint (default: the ledger's models.surrogate.checkpoint; "
                                        "with --env the released rig_default, as the environments load)")
    c.add_argument("--analytic", choices=["identified", "nominal"], help="with --ledger: the analytic panel, the "
                   "ledger's identified parameters or nominal MuJoCo (default identified)")
    c.add_argument("--set", action="append", metavar="KEY=VALUE", help="with --suite: override a suite value (repeatable)")
    c.add_argument("--test-data", help="with --suite: a capture dataset in place of the suite's test episodes")
    c.add_argument("--object", help="with --env: procedural object family (default box)")
    c.add_argument("--object-seed", type=non_negative_int, help="with --env: seed of the object family (default 0)")
    c.add_argument("--seed", type=non_negative_int, help="with --env: environment seed of the rollout (default 0)")
    c.add_argument("--duration", type=positive_float, help="with --env: rollout length in s (default 3.0)")
    c.add_argument("--out", required=True, help="video to write: .mp4 (H.264) or .gif; written atomically")
    c.add_argument("--still", help="also write one frame as a PNG (default: the last frame, traces complete)")
    c.add_argument("--still-at", type=float, help="episode time in s of the --still frame (default: the end)")
    c.add_argument("--gif", help="also write the video as a GIF")
    c.add_argument("--gif-width", type=int, help="width of the --gif in pixels (every other frame; default: full size)")
    c.add_argument("--width", type=int, default=320, help="pixels of one panel (default 320)")
    c.add_argument("--height", type=int, default=240, help="pixels of one panel (default 240)")
    c.add_argument("--fps", type=float, default=30.0, help="video frames per second (default 30)")
    c.add_argument("--speed", type=float, default=1.0, help="episode seconds per video second; 0.25 is 4x slow motion (default 1)")
    c.add_argument("--max-seconds", type=float, help="render at most this much of the episode, in s (default: all)")
    c.add_argument("--overwrite", action="store_true", help="replace existing output files")
    c.add_argument("--json", action="store_true", help="print what was written as JSON")
    c.add_argument("--quiet", action="store_true", help="no progress bars")
    c.set_defaults(func=_cmd_render, check_args=lambda a, c=c: check_render(c, a))

    c = sub.add_parser("jaco", help="the Kinova Jaco (dm_control's MJCF) grasps held-out objects: analytic vs learned contact")
    c.add_argument("--objects", default="heldout", help="object split or folder (default heldout: new families)")
    c.add_argument("--count", type=int, default=8, help="objects of the split, spread over it (default 8)")
    c.add_argument("--checkpoint", help="the learned contact (default: the released rig_default)")
    c.add_argument("--assets", help="dm_control's third_party/kinova folder (default: $SURROGATE_JACO_ASSETS, else the "
                   "installed dm_control: pip install --no-deps dm-control)")
    c.add_argument("--video", help="write a side-by-side MP4 (analytic | learned) of the first object here")
    c.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")
    c.set_defaults(func=_lazy_run(".bench.jaco_grasp"))

    c = sub.add_parser("speed", help="environment steps per second: analytic vs hybrid stepping")
    speed_parser(c)
    c.set_defaults(func=_lazy_run(".bench.speed"))

    c = sub.add_parser("release", help="a trained checkpoint becomes a release by a benchmark's paired rule (new folder)")
    from .bench.promote import build_parser as release_parser

    release_parser(c)
    c.set_defaults(func=_lazy_run(".bench.promote"))

    c = sub.add_parser("ensemble", help="one checkpoint of several networks trained on the same law (averaged)")
    cli_args.ensemble_arguments(c)
    c.set_defaults(func=_lazy_run(".model.ensemble"))

    from .training.cli import DESCRIPTION, EPILOG, add_arguments

    c = sub.add_parser("train", help="train a contact surrogate under a config (configs/train/<name>.yaml, or its name)",
                       description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(c)
    c.set_defaults(func=_lazy_run(".training.cli"))

    c = sub.add_parser("quickstart", help="the main job on the embedded default (see README)")
    c.add_argument("--out", default="runs/quickstart", help="output folder (default runs/quickstart): new, empty or "
                   "an earlier quickstart's, whose folders are replaced")
    c.add_argument("--rig-episodes", type=int, default=60, help="grasp episodes the rig generates for training (default 60)")
    c.add_argument("--epochs", type=int, default=1, help="epochs of the surrogate's prior law (default 1; then one of its network corrections)")
    c.add_argument("--workers", type=int, default=2, help="parallel workers for generation and the rig-grasp bench's "
                   "tasks (processes; default 2); with 2 or more the cube-real stage runs beside training")
    c.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a value of the cube-real-small suite")
    c.add_argument("--rig-set", action="append", metavar="KEY=VALUE", help="override a value of the rig-grasp-small suite")
    c.set_defaults(func=_cmd_quickstart)
    add_verbose_everywhere(p)
    return p


def _show_logs(quiet: bool) -> None:
    """The library's log messages (``logging`` under ``surrogate``) on stderr: warnings always, progress
    notes unless ``--quiet``."""
    log = logging.getLogger("surrogate")
    if not any(getattr(h, "_surrogate_cli", False) for h in log.handlers):
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(logging.Formatter("%(message)s"))
        h._surrogate_cli = True
        log.addHandler(h)
    log.setLevel(logging.WARNING if quiet else logging.INFO)


def _own_warnings_once() -> None:
    """The stepper's own warnings (``SurrogateWarning``) as one line, the first of each kind only: a benchmark builds
    a stepper per replay, and each warned again (the counts are in the ledgers); ``--verbose`` (any command) shows all."""
    seen: set = set()
    default = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        hs = sys.modules.get("surrogate.sim.hybrid_step")  # no import here: a warning may come mid-import
        if hs is None or not issubclass(category, hs.SurrogateWarning):
            return default(message, category, filename, lineno, file, line)
        kind = getattr(message, "kind", None) or str(message).split(" at step")[0].split(":")[0]
        if kind not in seen:
            seen.add(kind)
            print(f"warning: {message} (first of its kind; --verbose shows each)", file=sys.stderr)

    warnings.showwarning = show


def main(argv=None) -> int:
    # Headless rendering (videos, render_mode="rgb_array") without a display: MuJoCo reads this on import.
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("MUJOCO_GL", "egl")
    args = build_parser().parse_args(argv)
    if hasattr(args, "check_args"):  # flags that depend on each other: a usage error (exit 2) as argparse's own
        args.check_args(args)
    if args.verbose:  # before or after the command's name; read by the filters of known third-party noise (__init__.py)
        os.environ["SURROGATE_VERBOSE"] = "1"
    else:
        _own_warnings_once()
    _show_logs(bool(getattr(args, "quiet", False)))
    try:
        args.func(args)
    except BrokenPipeError:  # e.g. `surrogate inspect X | head`
        sys.stderr.close()
    except (SurrogateError, OSError) as e:  # bad input, or a file system refusing (full, read-only, permissions)
        if args.debug:
            raise
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    return 0


def one_line(e: BaseException) -> str:
    """An error as the one line a user reads (an OSError with its file: ``<file>: <reason>``); ``--debug`` shows
    the traceback instead."""
    if isinstance(e, OSError) and not isinstance(e, SurrogateError) and e.strerror:
        where = f"{e.filename}: " if e.filename else ""
        return f"{where}{e.strerror}"
    return str(e)


if __name__ == "__main__":
    sys.exit(main())
