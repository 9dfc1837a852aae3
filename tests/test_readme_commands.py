"""The README's recipes run as written: every code block of its "Recipes" section is read from README.md itself
(so an edit of the README is what is tested), and the cheap ones run in a fresh process from another folder.

The costly ones (a training run, a benchmark suite) are checked as far as that is cheap: their keys with
``--print-config`` (which reads and writes nothing), their suites and checkpoints by name.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from surrogate.paths import release_checkpoint
from surrogate.suites import load_suite

ROOT = Path(__file__).resolve().parents[1]


def _recipe_blocks() -> dict[str, list[str]]:
    """{language: [block text]} of the fenced code blocks under the README's '## Recipes' heading."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Recipes\n", 1)[1].split("\n## ", 1)[0]
    out: dict[str, list[str]] = {}
    for lang, body in re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S):
        out.setdefault(lang, []).append(body)
    return out


def _commands(lang: str = "bash") -> list[list[str]]:
    """Every ``surrogate ...`` command line of the recipes' shell blocks, comments dropped, as argv lists."""
    cmds = []
    for block in _recipe_blocks().get(lang, []):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("surrogate "):
                cmds.append(shlex.split(line))
    return cmds


def _run(argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_the_readme_has_its_three_recipes():
    blocks = _recipe_blocks()
    train = [c for c in _commands() if c[1] == "train"]
    bench = [c for c in _commands() if c[1] == "bench"]
    assert train and bench and blocks.get("python"), "the Recipes section lost a recipe (train, step, benchmark)"


def test_the_step_recipe_runs_verbatim_in_a_fresh_process(tmp_path):
    """The Gymnasium snippet, exactly as the README prints it, in a new interpreter started in an empty folder."""
    (snippet,) = [b for b in _recipe_blocks()["python"] if "gymnasium.make" in b]  # the Jaco's: tests/test_jaco.py
    script = tmp_path / "step.py"
    script.write_text(snippet + "\nprint('STEPPED', obs.shape, float(reward))\n")
    r = _run([sys.executable, str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "STEPPED" in r.stdout


def test_the_train_recipe_keys_are_accepted(tmp_path, monkeypatch, capsys):
    """Each ``surrogate train`` line (and the short-run flags the text gives) resolves with ``--print-config``, from
    another folder: a misspelt key in the README would stop the run, naming the key. In this process: a fresh
    interpreter per line cost 15 s of imports each, and the step recipe above already runs in one."""
    from surrogate.cli import main

    text = (ROOT / "README.md").read_text().split("\n## Recipes\n", 1)[1].split("\n## ", 1)[0]
    short = re.search(r"A short run for a first look: `([^`]+)`", text)
    assert short, "the short-run flags are gone from the recipe"
    monkeypatch.chdir(tmp_path)
    for argv in (c for c in _commands() if c[1] == "train"):
        argv = argv + shlex.split(short.group(1)) + (["--print-config"] if "--print-config" not in argv else [])
        code = main(argv[1:])
        out, err = capsys.readouterr()
        assert code == 0, (argv, err[-2000:])
        assert "stages:" in out and "data:" in out
    assert not list(tmp_path.iterdir())  # --print-config writes nothing


@pytest.mark.parametrize("argv", [c for c in _commands() if c[1] == "bench"], ids=lambda c: c[2])
def test_the_bench_recipe_names_a_suite_and_a_checkpoint_that_exist(argv):
    """A benchmark suite takes minutes (its own tests run it small); here its suite and checkpoint resolve."""
    suite = load_suite(argv[2])
    assert suite.get("name") or suite.get("hypothesis"), argv
    if "--checkpoint" in argv:
        ckpt = argv[argv.index("--checkpoint") + 1]
        if ckpt.startswith("checkpoints/"):
            assert (release_checkpoint(Path(ckpt).name) / "card.json").is_file(), ckpt


def _documented_commands(*docs: str) -> list[tuple[str, list[str]]]:
    """(file, argv) of every ``surrogate ...`` command in the shell blocks of ``docs`` (backslash continuations
    joined, comments dropped); lines with placeholders (``...``, ``[--a | --b]`` alternatives) are left out."""
    out = []
    for doc in docs:
        text = (ROOT / doc).read_text()
        for block in re.findall(r"```(?:bash|sh)\n(.*?)```", text, flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                argv = shlex.split(line, comments=True)
                if argv[:1] == ["surrogate"] and "..." not in line and "[--" not in line:
                    out.append((doc, argv))
    return out


DOCUMENTED = _documented_commands("README.md", "docs/benchmarks.md")


@pytest.mark.parametrize("doc,argv", DOCUMENTED, ids=[f"{d}:{' '.join(a[1:3])}" for d, a in DOCUMENTED])
def test_every_documented_command_parses_and_names_what_exists(doc, argv):
    """Each command of the README and docs/benchmarks.md as written: the command line parses (every flag and choice
    exists), its suite loads with its ``--set`` overrides applied (suite keys themselves are not checked yet), a
    release or config it names is there. Running them is the suites' own tests' job (minutes each); this catches a
    doc that drifted from the command line."""
    from surrogate.cli import build_parser

    try:
        args = build_parser().parse_args(argv[1:])
    except SystemExit:
        pytest.fail(f"{doc}: `{shlex.join(argv)}` does not parse")
    if argv[1] == "bench":
        load_suite(args.suite, getattr(args, "set", None) or ())
    for flag in ("--checkpoint", "--config"):
        if flag in argv:
            value = argv[argv.index(flag) + 1]
            if value.startswith(("checkpoints/", "configs/")):
                assert (ROOT / value).exists(), f"{doc}: {value} does not exist"
