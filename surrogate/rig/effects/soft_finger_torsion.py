"""Soft-finger torsional friction: the patch grows with load, coupled to the tangential force.

Physical basis
--------------
A soft fingertip pressed on a surface makes a contact patch of radius ``a`` that grows
with the normal load, ``a = c N**gamma_r``; ``gamma_r = 1/3`` for a linear elastic
(Hertzian) fingertip, and measured rubber and silicone fingertips lie between 0 and 1/3
(Xydas and Kao 1999, "Modeling of contact mechanics and friction limit surfaces for soft
fingers in robotics, with experimental results", Int. J. Robotics Research 18(9):941-950).
With the Hertzian pressure distribution the largest torsion the patch transmits about its
normal is

    tau_max = (3 pi / 16) * mu * N * a

(the limiting twisting moment of a Hertzian contact, Lubkin 1951; Johnson 1985, "Contact
Mechanics", Cambridge University Press)

so ``tau_max ∝ N**(1 + gamma_r)``: it grows faster than the load. Tangential force and
torsion share the patch's friction; Howe and Cutkosky (1996, "Practical force-motion
models for sliding manipulation", IJRR 15(6):557-572) and Xydas and Kao approximate the
limit surface by an ellipse

    (f_t / (mu N))**2 + (tau / tau_max)**2 <= 1.

The rig's sliding law is the one whose twist is normal to that ellipse (maximum
dissipation), regularized like the Coulomb law:

    f_t = -(mu N)**2 v_t / s,   tau = -tau_max**2 w_n / s,
    s = sqrt((mu N)**2 |v_t|**2 + tau_max**2 w_n**2 + (mu N eps)**2)

(``v_t``: tangential slip of the patch centre, ``w_n``: spin about the pad normal,
``eps = physics.friction_regularization``); on the ellipse when sliding, inside it while
sticking. ``mu`` is the patch's load-weighted coefficient (after ``friction_map``,
``stribeck_friction`` and ``load_dependent_friction``). The radius at ``reference_load``
is drawn per episode from ``radius_min .. radius_max`` (3-5 mm at 1 N: a silicone
fingertip of ~1 cm radius, the range of Xydas and Kao's fingertips), ``gamma_r`` from
``exponent_min .. exponent_max``; ``a`` is capped at the pad's half width (10 mm).
MuJoCo's torsional friction is one constant coefficient times N (``condim`` 4-6), its
cone not coupled to the tangential force this way.

Stability: both terms are damping coefficients (``(mu N)**2 / s``, ``tau_max**2 / s``)
evaluated at this step's twist and solved semi-implicitly at the end-of-step twist, as
the point Coulomb law is (``surrogate.rig.physics``).

When disabled: the pad's torsion comes from the friction of its own contact cells
(``compliant_pads``' lattice, or the stiff point), and tangential force and torsion are
not coupled through a limit surface (unless ``presliding_friction`` is on: then the
lattice's torsion capacity ``sum_j mu_j f_j |r_j|`` takes the place of ``tau_max``).
"""

from __future__ import annotations

import math

import numpy as np

NAME = "soft_finger_torsion"
DOC = "soft-finger torsion: patch radius a ∝ N^gamma_r, tau_max = 3pi/16 mu N a, elliptic limit surface; off: cell friction"
PARAMS = {
    "radius_min": {"kind": "float", "default": 0.003, "range": (0.0005, 0.01), "unit": "m",
                   "doc": "smallest patch radius at the reference load (drawn per episode)"},
    "radius_max": {"kind": "float", "default": 0.005, "range": (0.0005, 0.01), "unit": "m",
                   "doc": "largest patch radius at the reference load"},
    "exponent_min": {"kind": "float", "default": 0.2, "range": (0.0, 0.3334), "unit": "1",
                     "doc": "lowest gamma_r of a ∝ N^gamma_r (1/3: Hertz; Xydas and Kao 1999)"},
    "exponent_max": {"kind": "float", "default": 0.3333, "range": (0.0, 0.3334), "unit": "1",
                     "doc": "highest gamma_r"},
    "reference_load": {"kind": "float", "default": 1.0, "range": (0.1, 10.0), "unit": "N",
                       "doc": "load at which the patch has the drawn radius"},
}

HERTZ_TORSION = 3.0 * math.pi / 16.0  # tau_max / (mu N a) of a Hertzian pressure distribution
MAX_RADIUS = 0.01  # m, the pad's half width


def draw(params: dict, rng: np.random.Generator) -> dict:
    """The episode's hidden values: {"radius_m": a at the reference load, "exponent": gamma_r}."""
    return {"radius_m": float(rng.uniform(params["radius_min"], params["radius_max"])),
            "exponent": float(rng.uniform(params["exponent_min"], params["exponent_max"]))}


def patch_radius(load, *, radius_m: float, exponent: float, reference_load: float):
    """Contact radius (m) at normal load ``load`` (N; float or array), capped at the pad's half width.

    Plain arithmetic (``max(x, 0) = (x + |x|) / 2``, ``min(a, c) = (a + c - |a - c|) / 2``), so the
    rig's per-pad loop pays no numpy call on a float."""
    a = radius_m * ((load + abs(load)) / (2.0 * reference_load)) ** exponent
    return (a + MAX_RADIUS - abs(a - MAX_RADIUS)) / 2.0


def torsion_limit(mu, load, **radius):
    """Largest torsion (N m) about the pad normal: ``3 pi / 16 * mu * N * a(N)`` (floats or arrays)."""
    return HERTZ_TORSION * mu * load * patch_radius(load, **radius)


def limit_surface_damping(f_max, tau_max, slip, spin, eps: float):
    """(tangential damping N s/m, torsional damping N m s/rad) of the regularized elliptic law:
    ``f_t = -a_t v_t``, ``tau = -a_tau w_n`` (see the module docstring). Floats or arrays (plain arithmetic)."""
    s = ((f_max * slip) ** 2 + (tau_max * spin) ** 2 + (f_max * eps) ** 2) ** 0.5 + 1e-300
    return f_max ** 2 / s, tau_max ** 2 / s
