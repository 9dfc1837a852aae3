"""The capture rig's truth is its own (issue #24): nothing under ``surrogate/rig/`` reaches the learned model,
and the default rig's pad and table laws are not the learned law's Hunt-Crossley family.

Guards: a static parse of every rig module's imports; a fresh interpreter importing every ``surrogate.rig``
module and finding no ``surrogate.model`` / ``surrogate.sim`` module loaded; the pulp law and the
impact-remembering table law by hand-computed values; a box resting on the table under the default rig
settles without drift, and one dropped remembers its impact speed.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import numpy as np
import pytest

from surrogate.objects import make_object
from surrogate.paths import REPO_ROOT
from surrogate.rig.config import load_rig_config
from surrogate.rig.contact_law import EXPONENTIAL, POWER, normal_law
from surrogate.rig.effects import impact_damping, pulp_stiffening
from surrogate.rig.physics import RigPhysics

RIG = REPO_ROOT / "surrogate" / "rig"
FORBIDDEN = ("surrogate.model", "surrogate.sim")


def _imports(path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``path`` (relative imports resolved), wherever it stands."""
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    pkg = parts[:-1]  # the package a level-1 relative import names (for an __init__ too)
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = pkg[: len(pkg) - (node.level - 1)] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out += [(node.lineno, mod)] + [(node.lineno, f"{mod}.{a.name}") for a in node.names]
    return out


def test_no_rig_module_imports_the_model_or_the_simulator():
    files = sorted(RIG.rglob("*.py"))
    assert len(files) > 20  # the whole rig package, effects included
    bad = [f"{p.relative_to(REPO_ROOT)}:{line} imports {mod}" for p in files for line, mod in _imports(p)
           if any(mod == f or mod.startswith(f + ".") for f in FORBIDDEN)]
    assert not bad, bad


def test_the_import_check_sees_relative_and_nested_imports(tmp_path):
    # the static check must not be blind: a relative import inside a function is resolved and caught
    probe = RIG / "effects" / "_probe_for_test.py"
    probe.write_text("def f():\n    from ...model import law\n    return law\n")
    try:
        assert (2, "surrogate.model.law") in _imports(probe)
    finally:
        probe.unlink()


def test_importing_every_rig_module_loads_no_model_module():
    code = (
        "import importlib, json, pkgutil, sys\n"
        "import surrogate.rig as rig\n"
        "names = [m.name for m in pkgutil.walk_packages(rig.__path__, 'surrogate.rig.')]\n"
        "for n in names: importlib.import_module(n)\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('surrogate.'))\n"
        "print(json.dumps({'modules': names, 'loaded': loaded}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert "surrogate.rig.physics" in res["modules"] and "surrogate.rig.effects.pulp_stiffening" in res["modules"]
    bad = [m for m in res["loaded"] if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]
    assert not bad, bad


def test_pulp_law_is_exponential_with_a_tangent_stiffness_dashpot():
    b, m, zeta, dt = 2000.0, 2000.0, 0.005, 1e-3
    depth = np.array([0.35e-3, 1.0e-3, 1.3e-3, -1e-4])
    vn = np.array([0.0, -0.02, 0.0, -0.1])  # the second point is being compressed at 20 mm/s
    law = np.tile([EXPONENTIAL, b, m, zeta], (4, 1))
    f0, bn, fn = normal_law(depth, vn, law, dt)
    fe = b / m * (np.exp(m * depth[:3]) - 1.0)  # 0.0138 N/mm^-1 ... by hand: 1 N (e^0.7 - 1) = 1.01 N at 0.35 mm
    assert f0[:3] == pytest.approx(fe, rel=1e-12) and f0[0] == pytest.approx(1.0138, abs=1e-3)
    assert fn[1] == pytest.approx(fe[1] + zeta * b * np.exp(m * 1e-3) * 0.02, rel=1e-12)  # Kelvin-Voigt, not f x c
    assert bn[1] == pytest.approx((zeta + dt) * b * np.exp(2.0), rel=1e-12)
    assert f0[3] == fn[3] == bn[3] == 0.0  # separated: no force, no damping
    # not a power law: the log-log slope grows with depth (a power law k d^p has the constant slope p)
    d = np.array([1e-4, 1e-3, 2e-3])
    f = pulp_stiffening.elastic_force(d, stiffness=b, stiffening=m)
    slopes = np.diff(np.log(f)) / np.diff(np.log(d))
    assert slopes[1] > slopes[0] * 1.5
    assert pulp_stiffening.force(np.array([1e-3]), np.array([0.02]), stiffness=b, stiffening=m,
                                 damping_time=zeta)[0] == pytest.approx(fn[1], rel=1e-12)


def test_impact_damping_remembers_the_first_touch():
    mem = np.zeros(3)
    mem = impact_damping.remember(mem, np.array([True, True, False]), np.array([0.5, 0.001, 0.3]),
                                  impact_speed_min=0.02)
    assert mem.tolist() == [0.5, 0.02, 0.0]  # first touch: its approach speed (floored); not touching: none
    mem = impact_damping.remember(mem, np.array([True, False, True]), np.array([0.0, 0.0, 0.1]),
                                  impact_speed_min=0.02)
    assert mem.tolist() == [0.5, 0.0, 0.1]  # kept while touching, forgotten at separation
    c = impact_damping.damping(np.array([0.5]), restitution=0.5)
    assert c[0] == pytest.approx(3 * (1 - 0.25) / 4 / 0.5)
    # the same penetration and rate give another force after a hard impact than after a gentle one
    law = np.array([[POWER, 2e6, 1.5, c[0]], [POWER, 2e6, 1.5, impact_damping.damping(0.02, restitution=0.5)]])
    _, _, fn = normal_law(np.full(2, 1e-5), np.full(2, -0.01), law, 1e-3)
    assert fn[1] > 5 * (fn[0] - 2e6 * 1e-5**1.5)


@pytest.fixture(scope="module")
def box():
    return make_object("box", 0, size_x=0.05, size_y=0.04, size_z=0.05)


def _rest(box, drop_m: float, seconds: float):
    cfg = load_rig_config()  # the default rig (v3)
    assert cfg["effects"]["pulp_stiffening"]["enabled"] and cfg["effects"]["impact_damping"]["enabled"]
    rngs = {k: np.random.default_rng(0) for k in ("mass_mismatch", "actuator", "fingertips")}
    ph = RigPhysics(cfg, box, hand="parallel_jaw", timestep=1 / 1080, rngs=rngs)
    m = ph.model
    ph.data.qpos[m.jnt_qposadr[m.body_jntadr[ph.ob]] + 2] += drop_m
    cmd = ph.data.ctrl[ph.act_ids].copy()
    pos, mem = [], 0.0
    for _ in range(int(seconds * 1080)):
        ph.step(cmd)
        pos.append(ph.data.xpos[ph.ob].copy())
        mem = max(mem, float(ph.impact_speed.max()))
    return np.array(pos), mem, ph


def test_a_box_resting_on_the_table_settles_and_does_not_drift(box):
    pos, _, ph = _rest(box, 0.0, 2.0)
    assert np.isfinite(pos).all()
    assert np.abs(pos[-1] - pos[1079]).max() < 1e-6  # no creep over the last second
    assert abs(pos[-1, 2] - pos[0, 2]) < 2e-4 and np.abs(ph.data.qvel).max() < 1e-6


def test_a_dropped_box_remembers_its_impact_speed_and_settles(box):
    pos, mem, _ = _rest(box, 0.01, 1.0)
    assert mem == pytest.approx(np.sqrt(2 * 9.81 * 0.01), rel=0.1)  # v0 = sqrt(2 g h) at first touch
    assert np.abs(pos[-1] - pos[-100]).max() < 1e-6 and pos[:, 2].max() < pos[0, 2] + 1e-6  # no bounce above the drop
