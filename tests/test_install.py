"""``pip install .`` (not editable) works outside the checkout: configs, schema and releases ship with the package.

The install goes into a fresh virtual environment that sees this test environment's packages (a ``.pth``
line, and ``--system-site-packages``), with ``--no-deps --no-build-isolation --no-index``: no downloads,
only the project itself is built and installed. Every command then runs from a folder outside the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from surrogate.paths import REPO_ROOT

from .conftest import SHARED, needs_shared

SOURCES = ("pyproject.toml", "README.md", "surrogate", "configs", "checkpoints")  # what the build reads


def test_pyproject_lists_every_subpackage_and_maps_the_data_folders():
    tomllib = pytest.importorskip("tomllib")
    tool = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {".".join(p.relative_to(REPO_ROOT).parts) for p in (REPO_ROOT / "surrogate").rglob("*")
               if p.is_dir() and p.name != "__pycache__" and any(p.glob("*.py"))} | {"surrogate"}
    listed = set(tool["packages"])
    assert on_disk <= listed, f"add {sorted(on_disk - listed)} to [tool.setuptools] packages in pyproject.toml"
    # a regular package each (a namespace package imports from the checkout but can be left out of a build)
    no_init = sorted(p for p in on_disk if not (REPO_ROOT.joinpath(*p.split(".")) / "__init__.py").is_file())
    assert not no_init, f"add an __init__.py to {no_init}"
    assert tool["package-dir"] == {"surrogate.configs": "configs", "surrogate.checkpoints": "checkpoints"}


def _run(cmd, *, cwd, env, timeout=120):
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return r


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv bin folder, a work folder outside the checkout, the environment to run in)."""
    pytest.importorskip("setuptools")
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in SOURCES:
        p = REPO_ROOT / name
        shutil.copytree(p, src / name, ignore=ignore) if p.is_dir() else shutil.copy(p, src / name)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True, timeout=60)
    py = venv / "bin" / "python"
    purelib = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True,
                             capture_output=True, text=True).stdout.strip()
    # this environment's packages (torch, mujoco, ...) without its .pth hooks (so not its editable install)
    (Path(purelib) / "_test_env.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(SURROGATE_CACHE=str(tmp / "cache"), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    r = _run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
              src], cwd=tmp, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    shutil.rmtree(src)  # nothing of the sources is left to fall back on
    work = tmp / "work"
    work.mkdir()
    return venv / "bin", work, env


@pytest.mark.slow
def test_installed_package_finds_its_configs_schema_and_releases(installed):
    bin_dir, work, env = installed
    r = _run([bin_dir / "surrogate", "--version"], cwd=work, env=env)
    assert r.returncode == 0 and r.stdout.startswith("surrogate "), r.stderr
    probe = """
import json, surrogate
from surrogate import paths
from surrogate.bench.ledger import SCHEMA_PATH
from surrogate.suites import SUITE_DIR, load_suite
from surrogate.model.checkpoint import load_checkpoint
from surrogate.objects import load_split
from surrogate.rig.config import load_rig_config
load_checkpoint(paths.release_checkpoint("cube_tosses"))
print(json.dumps({"file": surrogate.__file__, "checkout": str(paths.checkout_root()), "configs": str(paths.config_dir()),
                  "suites": sorted(p.stem for p in SUITE_DIR.glob("*.yaml")), "n_test": load_suite("cube-real-small")["data"]["n_test"],
                  "schema": SCHEMA_PATH.is_file(), "train_objects": len(load_split("train")), "rig": bool(load_rig_config(None))}))
"""
    r = _run([bin_dir / "python", "-c", probe], cwd=work, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    site_dir = str(bin_dir.parent)
    assert got["file"].startswith(site_dir) and got["configs"].startswith(site_dir) and got["checkout"] == "None", got
    assert {"cube-real", "cube-real-small", "rig-grasp-small", "policy-small"} <= set(got["suites"]) and got["n_test"] == 60
    assert got["schema"] and got["train_objects"] > 0 and got["rig"]
    r = _run([bin_dir / "surrogate", "bench", "cube-real-small", "--help"], cwd=work, env=env)
    assert r.returncode == 0 and "--checkpoint" in r.stdout, r.stderr
    r = _run([bin_dir / "surrogate", "bench", "no-such-suite", "--out", "x"], cwd=work, env=env)
    assert r.returncode == 2 and "'cube-real-small'" in r.stderr, r.stderr  # known suites listed, not []
    r = _run([bin_dir / "surrogate", "train", "-c", "cube_tosses", "--print-config"], cwd=work, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"out_dir: {work / 'runs' / 'cube_tosses'}" in r.stdout  # an installed config's paths: the current folder
    assert f"root: {work / 'datasets' / 'generated' / 'contactnets_cube'}" in r.stdout


@pytest.mark.slow
@needs_shared("contactnets_cube")
def test_installed_package_runs_a_small_cube_real_bench_from_another_folder(installed):
    bin_dir, work, env = installed
    tosses = work / "tosses"
    tosses.mkdir()
    for p in sorted((SHARED / "contactnets_cube").glob("*.pt"))[:10]:
        shutil.copy(p, tosses / p.name)
    over = [f"data.source={tosses}", "data.n_test=3", "data.train_sizes=[4]", "baselines.identified.sizes=[4]",
            "baselines.identified.maxiter=1", "baselines.identified.popsize=2", "baselines.identified.cones=[elliptic]",
            "baselines.randomized.n=2", "video.width=64", "video.height=48", "video.fps=5"]  # full-size videos: 14 s more
    probe = "from surrogate.paths import release_checkpoint; print(release_checkpoint('cube_tosses'))"
    ckpt = _run([bin_dir / "python", "-c", probe], cwd=work, env=env).stdout.strip()  # the release shipped in the wheel
    cmd = [bin_dir / "surrogate", "bench", "cube-real-small", "--out", "report", "--quiet", "--checkpoint", ckpt]
    r = _run([*cmd, *[a for s in over for a in ("--set", s)]], cwd=work, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    ledger = json.loads((work / "report" / "ledger.json").read_text())
    assert ledger["models"]["surrogate"]["checkpoint"] == ckpt and (work / "report" / "report.md").is_file()
    assert (Path(env["SURROGATE_CACHE"])).is_dir() and not (work / "datasets").exists()  # the cache: $SURROGATE_CACHE
