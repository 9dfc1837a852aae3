"""The rig's contact laws linearized at this step's twists (the ``K``, ``w0`` of the semi-implicit solve).

The rig's own constitutive laws, written here and in ``rig/effects/`` (nothing is taken from the learned
model, ``surrogate.model``; only the linear solve is shared, ``surrogate.semi_implicit``). Per contact
point the normal law is one of two kinds (``law`` rows ``(kind, p1, p2, p3)``, ``point_batch``):

* ``POWER`` ``(k, n, c)``: ``f = k delta^n (1 + c rate)``, Hunt-Crossley with a constant ``c`` (rig v1 pads
  and table) or with ``c = 3 (1 - e^2) / (4 v0)`` per point from the remembered impact speed
  (``effects.impact_damping``, the table of rig v3);
* ``EXPONENTIAL`` ``(b, m, zeta)``: ``f = (b/m)(exp(m delta) - 1) + zeta b exp(m delta) rate``, the pulp law
  of ``effects.pulp_stiffening`` (the pads of rig v3);

and the tangential law is regularized Coulomb with the local coefficient (``friction_map`` shaped by
``stribeck_friction``) as a damping ``a = mu f_n / sqrt(|v_t|^2 + eps^2)``. Each point's law is linearized
at this step's velocity as ``F(v') = f0 n - a v' - b (v'.n) n``: ``f0`` the elastic force, ``a + b`` the
normal damping (the dashpot plus ``dt`` times the spring's tangent stiffness: the backward-Euler
treatment of the spring). With fingertip effects on (``rig.fingertips``) pad points get a spring factor
(``pad_relaxation``) and a friction factor (``load_dependent_friction``); with ``soft_finger_torsion`` or
``presliding_friction`` on, a pad's tangential friction is a patch law at its centre instead of its cells'.
Both laws are linear in their stiffness ``p1`` and the friction is linear in ``mu``, so both factors enter
exactly: the law is linearized with the scaled spring and ``mu = 1``, and ``a = mu a1``,
``b = b1 + a1 - a`` recover it for any ``mu``.

Shapes: P patches, N points; ``bt`` from ``point_batch``; twists ``xi`` [6 P] (object minus
pad / table, at the patch centres; linear then angular).
"""

from __future__ import annotations

import numpy as np

from surrogate.rig.effects import stribeck_friction
from surrogate.rig.geometry import EYE_I

POWER, EXPONENTIAL = 0.0, 1.0  # the normal law's kind, column 0 of ``bt["law"]``


def normal_law(depth, vn, law, dt: float):
    """The normal laws' terms per point (numpy).

    Args:
      depth: [N] m penetration (<= 0: separated).  vn: [N] m/s normal velocity (> 0 separating).
      law: [N, 4] rows ``(kind, p1, p2, p3)`` (module docstring).  dt: s, the step.
    Returns:
      (f0, bn, fn) each [N]: the elastic force, the normal damping (N s/m: dashpot plus ``dt`` x tangent
      stiffness) and the normal force at the current velocity; all 0 where the point is separated or
      pulled apart faster than the dashpot allows (``fn`` would be negative).
    """
    on = depth > 0
    ds = np.where(on, depth, 1.0)  # a safe base where separated
    kind, k, p, c = law[:, 0], law[:, 1], law[:, 2], law[:, 3]
    elastic = k * ds ** p * on
    fn = elastic * (1.0 - c * vn)
    bn = c * elastic + dt * p * k * ds ** (p - 1.0)
    ex = np.flatnonzero(kind == EXPONENTIAL)
    if ex.size:
        b, m, zeta, d = k[ex], p[ex], c[ex], np.maximum(depth[ex], 0.0)  # exp(m * 1.0) would overflow
        tangent = b * np.exp(m * d) * on[ex]
        elastic[ex] = b / m * np.expm1(m * d) * on[ex]
        fn[ex] = elastic[ex] - zeta * tangent * vn[ex]
        bn[ex] = (zeta + dt) * tangent
    active = fn > 0
    return elastic * active, bn * active, fn * active


def elastic_law(depth, law):
    """[N] N: the normal laws' elastic part alone (``f0`` of ``normal_law`` at rest), for ``pad_relaxation``."""
    on = depth > 0
    kind, k, p = law[:, 0], law[:, 1], law[:, 2]
    elastic = k * np.where(on, depth, 1.0) ** p * on
    ex = np.flatnonzero(kind == EXPONENTIAL)
    if ex.size:
        elastic[ex] = k[ex] / p[ex] * np.expm1(p[ex] * np.maximum(depth[ex], 0.0))
    return elastic


def friction_damping(mu, fn, speed, eps: float):
    """[N] N s/m: regularized Coulomb as a tangential damping, ``mu f_n / sqrt(|v_t|^2 + eps^2)``."""
    return mu * fn / (speed * speed + eps * eps) ** 0.5


def _point_maps(bt: dict) -> tuple[np.ndarray, np.ndarray]:
    """(r [N, 3] point offsets from their patch centre, B [N, 3, 6]: patch twist -> point velocity v_c + w x r)."""
    N, g = len(bt["depth"]), bt["g"]
    r = bt["pts"] - bt["centres"][g]
    B = np.zeros((N, 3, 6))
    B[:, EYE_I, EYE_I] = 1.0
    B[:, 0, 4], B[:, 0, 5] = r[:, 2], -r[:, 1]
    B[:, 1, 3], B[:, 1, 5] = -r[:, 2], r[:, 0]
    B[:, 2, 3], B[:, 2, 4] = r[:, 1], -r[:, 0]
    return r, B


def linearized_law(bt: dict, xi_all: np.ndarray, *, field, stribeck, eps: float, dt: float, tips=None, pad_R=None):
    """The point law linearized at the current twists.

    Args:
      bt: the point batch.  xi_all: [6 P] this step's twists.
      field: friction field (object-frame points -> mu_s).  stribeck: the effect's params or None.
      eps: m/s.  dt: s.  tips: ``FingertipLaw`` or None.  pad_R: [pads, 3, 3] pad geom frames (with tips).
    Returns:
      (K [6 P, 6 P] block-diagonal patch damping, w0 [P, 6] the law's wrenches at this step's velocity,
       (r, f0, a, b, active) per point for ``Patch``, fingertip step info for ``FingertipLaw.advance``
       or None).
    """
    P, N, g = len(bt["counts"]), len(bt["depth"]), bt["g"]
    r, B = _point_maps(bt)
    n = bt["normals"][g]
    v = (B @ xi_all.reshape(P, 6)[g][:, :, None])[:, :, 0]  # object velocity relative to pad / table
    vn = (v * n).sum(axis=1)
    law = bt["law"]
    vt = v - vn[:, None] * n
    speed = np.sqrt((vt * vt).sum(axis=1))
    mu = stribeck_friction.coefficient(field(bt["surf"]), speed, stribeck)
    tip = None
    if tips is None or not tips.active:
        # the normal law, regularized Coulomb friction as tangential damping a, and b so that a + b is
        # the normal damping (dashpot plus the spring's backward-Euler term dt dF/d(delta)).
        f0, bn, fn = normal_law(bt["depth"], vn, law, dt)
        a = friction_damping(mu, fn, speed, eps)
        b = bn - a
    else:
        f0, a, b, tip = _fingertip_points(bt, tips, vn, speed, mu, law, eps, dt)
    # K_j = a_j I + b_j n n^T;  patch K6 = sum_j B_j^T K_j B_j;  w0 = sum_j B_j^T f0_j n.
    KB = a[:, None, None] * B + (b[:, None] * n)[:, :, None] * (n[:, None, :] @ B)
    Bt = B.transpose(0, 2, 1)
    G = bt["G"]
    K6 = (G @ (Bt @ KB).reshape(N, 36)).reshape(P, 6, 6)
    w0 = G @ (Bt @ (f0[:, None] * n)[:, :, None])[:, :, 0]
    if tip is not None and tips.patch_friction:
        _pad_patches(bt, tips, tip, r, xi_all.reshape(P, 6), pad_R, K6, w0)
    K = np.zeros((6 * P, 6 * P))
    for p in range(P):
        K[6 * p:6 * p + 6, 6 * p:6 * p + 6] = K6[p]
    return K, w0, (r, f0, a, b, f0 > 0.0), tip


def _fingertip_points(bt, tips, vn, speed, mu, law, eps, dt):
    """The point laws with the pads' spring factor (relaxation) and friction factor (load dependence).

    A pad is one patch, so per-pad sums are per-patch sums (``np.add.reduceat``: points are grouped by
    patch) and per-point factors are the patch's repeated over its points."""
    counts, starts, pad = bt["counts_a"], bt["starts"], bt["pad"]
    patches = np.flatnonzero(pad >= 0)
    pads = pad[patches]
    elastic_pad = np.zeros(len(tips.q))
    if tips.on["pad_relaxation"]:
        elastic_pad[pads] = np.add.reduceat(elastic_law(bt["depth"], law), starts)[patches]
        scale = np.ones(len(counts))
        scale[patches] = tips.stiffness_scale(elastic_pad)[pads]
        law = law.copy()
        law[:, 1] = law[:, 1] * np.repeat(scale, counts)  # both laws are linear in their stiffness p1
    f0, bn, fn = normal_law(bt["depth"], vn, law, dt)
    a1 = friction_damping(1.0, fn, speed, eps)
    b1 = bn - a1
    if tips.on["load_dependent_friction"]:
        scale = np.ones(len(counts))
        scale[patches] = tips.friction_scale(np.add.reduceat(f0, starts)[patches])
        mu = mu * np.repeat(scale, counts)
    a = mu * a1
    if tips.patch_friction:  # the pads' tangential friction is the patch law (``_pad_patches``)
        a = a * np.repeat((pad < 0).astype(float), counts)
    b = b1 + a1 - a
    return f0, a, b, {"elastic_pad": elastic_pad, "mu": mu, "fn": fn, "state": None, "patches": patches}


def _pad_patches(bt, tips, tip, r, xi, pad_R, K6, w0) -> None:
    """Add the pad patches' tangential and torsional friction (``FingertipLaw.patch_terms``) to K6, w0."""
    patches = tip["patches"]
    if patches.size == 0:
        return
    mf = tip["mu"] * tip["fn"]
    if tips.on["soft_finger_torsion"]:
        f_max, load = np.add.reduceat(np.stack([mf, tip["fn"]], axis=1), bt["starts"])[patches].T
        lever = None
    else:  # the cells' own torsion capacity sum mu_j f_j |r_j| (lever in the pad plane)
        rn = (r * bt["normals"][bt["g"]]).sum(axis=1)
        arm = np.sqrt(np.maximum((r * r).sum(axis=1) - rn * rn, 0.0))
        f_max, load, moment = np.add.reduceat(np.stack([mf, tip["fn"], mf * arm], axis=1), bt["starts"])[patches].T
        lever = moment / np.maximum(f_max, 1e-300)
    pads = bt["pad"][patches]
    K, w, state = tips.patch_terms(pads, pad_R[pads], bt["normals"][patches], xi[patches], f_max, load, lever)
    K6[patches] += K
    w0[patches] += w
    tip["state"] = state


def point_batch(cands) -> dict:
    """All candidate patches' points in one batch: counts [P], g [N] (patch of each point), pts, surf [N, 3],
    depth [N], normals [P, 3], law [N, 4] (kind, p1, p2, p3: ``rig.contact_law``), G [P, N] (patch membership),
    centres [P, 3], pad [P] (pad index, -1 for the table), counts_a [P] and starts [P] (each patch's first point)."""
    P = len(cands)
    counts = [len(c[5]) for c in cands]
    N = sum(counts)
    g = np.repeat(np.arange(P), counts)
    pts = np.concatenate([c[3] for c in cands])
    G = np.zeros((P, N))
    G[g, np.arange(N)] = 1.0
    return {"counts": counts, "g": g, "pts": pts, "depth": np.concatenate([c[5] for c in cands]),
            "surf": np.concatenate([c[7] for c in cands]), "normals": np.array([c[4] for c in cands]),
            "law": np.array([c[6] for c in cands], dtype=float)[g], "G": G,
            "pad": np.array([c[1] if c[0] == "pad" else -1 for c in cands]),
            "counts_a": np.array(counts), "starts": np.cumsum([0] + counts[:-1]),
            "centres": (G @ pts) / np.array(counts, dtype=float)[:, None]}
