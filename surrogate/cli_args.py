"""The command line's argparse types and flag checks (the ``surrogate`` parser's, ``cli.py``, and the studies' own
parsers, e.g. ``bench/speed.py``): a bad value, or a flag the chosen mode would ignore, is argparse's one-line usage
error naming the flag (exit 2), never a traceback or a silently ignored flag later. Imports nothing heavy."""

from __future__ import annotations

import argparse
import math

VERBOSE_HELP = ("show every warning as printed: MuJoCo's, trimesh's, Lightning's and each of the stepper's (default: "
                "known third-party noise filtered, the stepper's once per kind)")


def _whole_number(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise argparse.ArgumentTypeError(f"must be a whole number of {least} or more, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number of 1 or more (a batch, a step count, a thread count), else the usage error."""
    return _whole_number(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number of 0 or more (a seed: NumPy's generators refuse negative ones)."""
    return _whole_number(text, 0)


def positive_float(text: str) -> float:
    """An argparse type: a finite number above 0 (a duration in s), else the usage error (nan, inf, 0, -1)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text!r}")
    return value


def refuse_unused(parser: argparse.ArgumentParser, args, mode: str, flags) -> None:
    """The usage error (exit 2) for the first of ``flags`` (option strings, default None or False) that the command
    line gave although ``mode`` (e.g. ``--env``) does not use it, instead of ignoring it."""
    for flag in flags:
        if getattr(args, flag.lstrip("-").replace("-", "_"), None) not in (None, False):
            parser.error(f"argument {flag}: does not apply with {mode}")


def add_verbose_everywhere(parser: argparse.ArgumentParser) -> None:
    """``--verbose`` after every command's name too (SUPPRESS: no value unless given, so that it does not undo
    ``surrogate --verbose COMMAND``): the stepper's warnings say "--verbose shows each" whatever the command."""
    for c in _leaves(parser):
        if "--verbose" not in c._option_string_actions:
            c.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)


def _leaves(parser: argparse.ArgumentParser):
    """The parsers of the commands that run (``render``, ``rig generate``), not of the groups."""
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for group in groups:
        for c in group.choices.values():
            yield from _leaves(c)
    if not groups:
        yield parser


# The flags of one input of `surrogate render` (--ledger, --suite, --env) that the other inputs would ignore
# (--which with --suite: render_command's error says what it needs).
_RENDER_UNUSED = {"--ledger": ("--set", "--test-data", "--object", "--object-seed", "--seed", "--duration"),
                  "--suite": ("--analytic", "--object", "--object-seed", "--seed", "--duration"),
                  "--env": ("--episode", "--which", "--analytic", "--set", "--test-data")}


def check_render(parser: argparse.ArgumentParser, a) -> None:
    """The usage error for a flag of another input of ``surrogate render`` than the one given."""
    mode = next(m for m in _RENDER_UNUSED if getattr(a, m[2:]))
    refuse_unused(parser, a, mode, _RENDER_UNUSED[mode])


def ensemble_arguments(c: argparse.ArgumentParser) -> None:
    """``surrogate ensemble``'s arguments (``model.ensemble.run``)."""
    c.add_argument("members", nargs="+", help="checkpoint folders: networks trained on the same law (2 or more)")
    c.add_argument("--out", required=True, help="the ensemble's checkpoint folder (new, or with --overwrite a "
                   "checkpoint to replace; never a release under checkpoints/)")
    c.add_argument("--overwrite", action="store_true", help="replace the checkpoint at --out")
