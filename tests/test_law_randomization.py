"""Domain randomization of the learned law (``model.randomize``): members drawn in their ranges and reproducible,
their parameters the law's times the drawn scales (a network's corrections riding on top), the law itself untouched,
passive whatever the draw, and the analytic ensemble's ranges mapped onto the law's."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import torch

from surrogate.bench.identify import ensemble_ranges
from surrogate.bench.transfer import learned_ensemble, learned_ranges
from surrogate.model.contact_law import ContactLawGNN
from surrogate.model.randomize import RANGES, law_ranges, randomized_laws, scaled_law
from surrogate.sim import Stepper

from .test_contact_law import CUBE, PAD, STRIBECK, TABLE, _cube_scene, _free_data, _perturbed
from .test_spin_friction import SPIN, dropped_spinning_cube_energy

torch.set_num_threads(1)


def _table(model) -> np.ndarray:
    """[2, 7] the constant law's compiled-step table: (k, c, mu_k, r, v_s, mu_spin, mu_roll) per group."""
    return model.numpy_law_table(np.array([False, True]), length=0.05, mass=0.2, gravity=9.81)[0]


def test_members_are_drawn_in_their_ranges_reproducibly_and_leave_the_law_alone():
    law = ContactLawGNN(prior=TABLE, prior_body=PAD, corrections=False).eval()
    before = {k: v.clone() for k, v in law.state_dict().items()}
    a = randomized_laws(law, n=64, seed=3)
    b = randomized_laws(law, n=64, seed=3)
    assert [s for _, s in a] == [s for _, s in b]
    assert [s for _, s in a] != [s for _, s in randomized_laws(law, n=64, seed=4)]
    for name, (lo, hi) in RANGES.items():
        vals = np.array([s[name] for _, s in a])
        assert vals.min() >= lo and vals.max() <= hi
        assert vals.max() - vals.min() > 0.5 * (hi - lo)  # 64 draws spread over the range, not a constant
    assert all(torch.equal(before[k], v) for k, v in law.state_dict().items())


def test_a_members_parameters_are_the_laws_times_its_scales():
    """Friction, stiffness and damping of both groups scale; a static/kinetic law keeps its ratio and its Stribeck
    speed; the point law's torsion scales with friction (a friction: (3 pi / 16) mu a), rolling does not."""
    law = ContactLawGNN(prior=dict(STRIBECK, **SPIN), corrections=False, stribeck=True).eval()
    s = {"friction": 1.25, "stiffness": 3.0, "damping": 0.8}
    t0, t1 = _table(law), _table(scaled_law(law, s))
    np.testing.assert_allclose(t1[:, 0] / t0[:, 0], 3.0, rtol=1e-6)
    np.testing.assert_allclose(t1[:, 1] / t0[:, 1], 0.8, rtol=1e-6)
    np.testing.assert_allclose(t1[:, 2] / t0[:, 2], 1.25, rtol=1e-6)
    np.testing.assert_allclose(t1[:, 3:5], t0[:, 3:5], rtol=1e-6)
    np.testing.assert_allclose(t1[:, 5] / t0[:, 5], 1.25, rtol=1e-6)
    np.testing.assert_allclose(t1[:, 6], t0[:, 6], rtol=1e-6)


def test_a_networks_corrections_ride_on_the_scaled_law():
    """The corrections multiply the law's parameters, so a member's per-contact parameters are the network's times the
    scales: k, c and mu, the torsion with mu, the rolling resistance not."""
    scene = _cube_scene()
    d = _free_data(scene, [0, 0, 0.05], [0.9, 0.3, 0.2, 0.1], [0.3, 0, -0.5], [1.0, -2.0, 0.5])
    mujoco.mj_step1(scene.model, d)
    net = _perturbed(ContactLawGNN(prior=dict(CUBE, **SPIN), corrections=True), scale=0.5)
    g = Stepper(scene, net).builder.build(scene.model, [d], dtype=torch.float64).graph
    member = scaled_law(net, {"friction": 0.75, "stiffness": 0.5, "damping": 1.2})
    with torch.no_grad():
        p0, p1 = net.law_parameters(g), member.law_parameters(g)
    assert len(p0) >= 1 and not torch.allclose(p0[:, 0], p0[0, 0].expand(len(p0)))  # per-contact corrections
    ratio = (p1 / p0).numpy()
    np.testing.assert_allclose(ratio, np.tile([0.5, 1.2, 0.75, 0.75, 1.0], (len(p0), 1)), rtol=1e-6)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_member_at_the_ends_of_its_ranges_never_gains_energy(seed):
    """Passivity does not depend on the operating point: saturated corrections on a law scaled to the corners of
    the ranges (stiffness x4 and x1/4, damping and friction at their ends), a spinning cube dropped onto the ground."""
    base = _perturbed(ContactLawGNN(prior=dict(CUBE, **SPIN), corrections=True, friction_iterations=1), seed=seed)
    lo, hi = {k: v[0] for k, v in RANGES.items()}, {k: v[1] for k, v in RANGES.items()}
    for scales in ({**hi, "damping": lo["damping"]}, {**lo, "friction": hi["friction"]}):
        e0, es = dropped_spinning_cube_energy(scaled_law(base, scales), seed)
        assert np.isfinite(es).all() and es.max() <= e0 + 1e-4 * abs(e0) and es[-1] < e0 - 0.1


def test_ranges_are_checked_and_the_analytic_ranges_map_onto_the_law():
    with pytest.raises(ValueError, match="unknown law randomization range 'timeconst'"):
        law_ranges({"timeconst": (0.5, 2.0)})
    with pytest.raises(ValueError, match="'friction' must be 0 < lo <= hi"):
        law_ranges({"friction": (1.3, 0.7)})
    with pytest.raises(ValueError, match="n must be a positive integer"):
        randomized_laws(ContactLawGNN(prior=CUBE, corrections=False), n=0)
    r = learned_ranges(ensemble_ranges(None))
    # solref's time constant x0.5..2 is the law's stiffness x1/4..4 (a time constant goes as 1 / sqrt(k))
    assert r == {"friction": (0.7, 1.3), "stiffness": (0.25, 4.0), "damping": (0.7, 1.3), "mass_scale": (0.9, 1.1)}
    law = ContactLawGNN(prior=TABLE, prior_body=PAD, corrections=False).eval()
    members = learned_ensemble(law, n=5, seed=0, ranges=ensemble_ranges({"mass_scale": (0.8, 0.85)}))
    assert len(members) == 5 and all(0.8 <= m.mass_scale <= 0.85 for m in members)
    t0 = _table(law)
    for m in members:
        assert _table(m.model)[1, 2] / t0[1, 2] == pytest.approx(m.scales["friction"], rel=1e-6)
        assert math.isfinite(m.scales["stiffness"]) and 0.25 <= m.scales["stiffness"] <= 4.0
