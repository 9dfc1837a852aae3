"""Shared test fixtures: where the public sample data is, and a plain skip when it is absent."""

from __future__ import annotations

import os
import tempfile

import pytest

# Headless rendering on CPU machines (CI has no display): EGL through PyOpenGL.
os.environ.setdefault("MUJOCO_GL", "egl")
# MuJoCo's warnings (tests blow simulations up on purpose) into a log file in the temporary folder, not the console
# and MUJOCO_LOG.TXT in the checkout; read by surrogate._third_party_output on import, inherited by subprocesses
os.environ.setdefault("SURROGATE_MUJOCO_LOG", os.path.join(tempfile.gettempdir(), f"contact-surrogate-tests-{os.getpid()}.log"))

from surrogate.paths import shared_data_dir

SHARED = shared_data_dir()


def needs_shared(sub: str):
    """Mark a test that reads ``<shared data>/<sub>``; it says plainly that it did not run without it."""
    return pytest.mark.skipif(not (SHARED / sub).exists(),
                              reason=f"sample data {SHARED / sub} is absent (set SURROGATE_DATA to the shared data folder)")
