"""Shared test fixtures: where the public sample data is, and a plain skip when it is absent."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Headless rendering on CPU machines (CI has no display): EGL through PyOpenGL.
os.environ.setdefault("MUJOCO_GL", "egl")
# The README runs the suite on two pytest-xdist workers (one per core of CI's machine): one thread of BLAS/OpenMP each
# (inherited by the subprocesses the tests start), so the workers do not oversubscribe the cores.
# Each worker also gets its own benchmark cache (imported tosses, generated test sets), so that two workers never
# import into the same folder at once; run serially, the tests share the checkout's cache as before.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    if "SURROGATE_CACHE" not in os.environ:
        os.environ["SURROGATE_CACHE"] = tempfile.mkdtemp(prefix=f"contact-surrogate-cache-{os.environ['PYTEST_XDIST_WORKER']}-")
        atexit.register(shutil.rmtree, os.environ["SURROGATE_CACHE"], ignore_errors=True)
# MuJoCo's warnings (tests blow simulations up on purpose) into a log file in the temporary folder, not the console
# and MUJOCO_LOG.TXT in the checkout; read by surrogate._third_party_output on import, inherited by subprocesses
os.environ.setdefault("SURROGATE_MUJOCO_LOG", os.path.join(tempfile.gettempdir(), f"contact-surrogate-tests-{os.getpid()}.log"))

from surrogate.paths import shared_data_dir

SHARED = shared_data_dir()


def _jaco_assets_missing() -> str | None:
    from surrogate.errors import ConfigError
    from surrogate.scenes.kinova import jaco_assets

    try:
        jaco_assets()
    except ConfigError as e:  # pragma: no cover - the README's test command installs them
        return str(e)
    return None


# a test of dm_control's Kinova Jaco hand; it says plainly that it did not run without the assets
needs_jaco = pytest.mark.skipif(_jaco_assets_missing() is not None,
                                reason="no Jaco assets (pip install --no-deps dm-control)")


def eval_script(name: str):
    """The module of ``eval/<name>.py`` (the studies there are scripts, not a package), loaded for a test."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "eval" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def needs_shared(sub: str):
    """Mark a test that reads ``<shared data>/<sub>``; it says plainly that it did not run without it."""
    return pytest.mark.skipif(not (SHARED / sub).exists(),
                              reason=f"sample data {SHARED / sub} is absent (set SURROGATE_DATA to the shared data folder)")


def trajectory(m, datas, n: int, stepper=None, *, contact=None, control=None):
    """[n, B, nq + nv] qpos and qvel of ``datas`` (B ``MjData`` of ``m``) after each of ``n`` physics steps under the
    hybrid ``stepper``, or plain ``mj_step`` without one; ``control(k, d)`` sets an ``MjData``'s controls before step
    k. The loop of the stepper's oracle tests (zero force == owned pairs excluded; MuJoCo's forces == ``mj_step``)."""
    import mujoco
    import numpy as np

    from surrogate.sim import step

    out = np.zeros((n, len(datas), m.nq + m.nv))
    for k in range(n):
        if control is not None:
            for d in datas:
                control(k, d)
        if stepper is None:
            for d in datas:
                mujoco.mj_step(m, d)
        else:
            step(m, datas, stepper, contact=contact)
        out[k] = [np.concatenate([d.qpos, d.qvel]) for d in datas]
    return out


def use_torch_network(monkeypatch) -> None:
    """Make the hybrid stepper run a network's torch forward instead of its compiled copy (``model.network_numpy``)."""
    for where in ("surrogate.sim.law_solve.numpy_network", "surrogate.sim.hybrid_step.numpy_network"):
        monkeypatch.setattr(where, lambda model: None)


@pytest.fixture
def torch_network(monkeypatch):
    """The stepper on a network's torch forward: for the tests that hold the stepper to the twin to 1e-9, the same
    float32 arithmetic on both sides. The compiled copy sums its products in another order than torch's kernels (~1e-7
    relative, which a chaotic toss amplifies); tests/test_network_numpy.py holds it to the torch model."""
    use_torch_network(monkeypatch)
