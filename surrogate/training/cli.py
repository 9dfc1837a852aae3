"""The training command line: ``surrogate train`` and ``python train.py fit`` (the same arguments).

    surrogate train --config cube_tosses                      # a packaged config, by name
    surrogate train -c configs/train/rig_default.yaml --set stages.prior.epochs=2 --seed 1
    surrogate train -c cube_tosses --print-config             # the resolved config as YAML; nothing runs
    surrogate train -c gns_cube --accelerator gpu --devices 1  # the end-to-end peer (the law trains on the CPU)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..cli_args import non_negative_int

ACCELERATORS = ("cpu", "gpu", "cuda", "mps", "tpu", "auto")
DESCRIPTION = "Train a contact surrogate (Lightning) under a YAML config; the trained model is exported as safetensors + card."
EPILOG = """\
config: a YAML path, or the name of a config shipped with the package (cube_tosses, rig_default;
gns_cube: the end-to-end learned peer, no MuJoCo).
Every key is checked: a misspelt one stops the run naming the key, the file and the close matches.
Relative paths (out_dir, data.root, export.*): on the command line, relative to the current folder;
in a config file under <project>/configs/ next to <project>/pyproject.toml (this repository), relative
to <project>; in any other config file (an installed package's, your own), relative to the current folder.
Export: <out_dir>/export unless export.dir is set; --release writes export.release_dir (refused over an
existing release without --overwrite). Logs: CSV and TensorBoard under out_dir. A new run into an out_dir that
holds a run (its result.json or run_config.json) is refused: resume it with --set ckpt_path=last, or choose another.
"""


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The training arguments (shared by ``surrogate train`` and ``train.py``)."""
    p.add_argument("--config", "-c", metavar="CONFIG",
                   help="training config: a YAML path or a packaged config name (cube_tosses, rig_default, gns_cube)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (dotted, value parsed as YAML), e.g. stages.prior.epochs=2; repeatable")
    p.add_argument("--seed", type=non_negative_int, default=None, help="seed of the run (the config's seed key; default: the config's, else 0)")
    p.add_argument("--accelerator", "--device", dest="accelerator", choices=ACCELERATORS, default=None,
                   help="trainer.accelerator (default: the config's, else cpu); model.kind: law trains on cpu only")
    p.add_argument("--devices", default=None, metavar="N",
                   help="trainer.devices: a count, 'auto' or a list such as [0,1] (default: the config's, else 1)")
    p.add_argument("--release", action="store_true",
                   help="export to the config's export.release_dir (a released checkpoint under checkpoints/) instead of the run's folder")
    p.add_argument("--overwrite", action="store_true", help="replace an existing checkpoint: the release with --release, "
                   "or one outside out_dir at export.dir, prior_dir or network_dir")
    p.add_argument("--print-config", action="store_true",
                   help="print the resolved config (defaults filled in, paths absolute) as YAML and exit without training")
    return p


def options(a: argparse.Namespace) -> dict:
    """The command-line options as config keys ({dotted key: value}), only those given."""
    from ..config import parse_yaml

    out = {}
    if a.seed is not None:
        out["seed"] = a.seed
    if a.accelerator is not None:
        out["trainer.accelerator"] = a.accelerator
    if a.devices is not None:
        out["trainer.devices"] = parse_yaml(a.devices)
    return out


def prepare(a: argparse.Namespace) -> dict:
    """The run's config from parsed arguments: loaded, checked, with its export folder."""
    from .config import load_config
    from .run import check_exports, check_new_run, export_dir

    cfg = load_config(a.config, a.set, options=options(a))
    cfg["export"]["dir"] = export_dir(cfg, release=a.release, overwrite=a.overwrite, check=not a.print_config)
    if not a.print_config:
        check_exports(cfg, release=a.release, overwrite=a.overwrite)
        check_new_run(cfg)  # the command writes <out_dir>/result.json: never over another run's
    return cfg


def run(a: argparse.Namespace) -> dict:
    """``--print-config``: print the resolved config, return it; else train, write the run's summary to
    ``<out_dir>/result.json`` and print where it and the checkpoint are."""
    cfg = prepare(a)
    if a.print_config:
        from .config import to_yaml

        print(to_yaml(cfg), end="")
        return cfg
    from .ddp import child_of_run
    from .quiet import quiet_lightning
    from .run import RESULT, fit

    child = child_of_run(cfg["out_dir"])  # asked first: the parent may have let its lock go when this rank ends
    with quiet_lightning(logs=False):  # Lightning's known warnings filtered, as the command line filters others
        res = fit(cfg)
    if child:  # a DDP rank of the run: the parent writes the summary and says where things are
        return res
    # the whole summary (about 120 lines of JSON) goes to a file of the run; the console gets where things are
    from ..atomic import write_json_atomic

    path = Path(cfg["out_dir"]) / RESULT
    write_json_atomic(path, json.loads(json.dumps(res, default=str)))
    print(f"trained: checkpoint {res.get('exported', '(not exported)')}; summary {path}")
    return res


def parser(prog: str = "train.py") -> argparse.ArgumentParser:
    """The parser of ``python train.py [fit] ...``."""
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", nargs="?", default="fit", choices=["fit"], help="what to do: fit (the only command; may be omitted)")
    return add_arguments(p)


def main(argv=None) -> dict:
    """``python train.py``: returns the run's summary (or the config with ``--print-config``); errors raise."""
    return run(parser().parse_args(argv))


def script_main(argv=None) -> int:
    """``python train.py`` as a script: errors are printed as ``error: ...`` (exit status 2), as ``surrogate`` does."""
    from ..errors import SurrogateError

    try:
        main(argv)
    except (SurrogateError, OSError) as e:  # bad input, or a file system refusing (full, read-only, permissions)
        os_error = isinstance(e, OSError) and not isinstance(e, SurrogateError) and e.strerror
        print(f"error: {f'{e.filename}: ' if os_error and e.filename else ''}{e.strerror if os_error else e}",
              file=sys.stderr)
        return 2
    return 0
