"""The fingertip effects of rig v2 in the pad contact law: hidden draws, per-pad state, patch terms.

``FingertipLaw`` holds what ``surrogate.rig.contact_law`` needs from the four fingertip effects
(``effects.FINGERTIP_EFFECTS``; each module's docstring has its physics and sources):

* ``load_dependent_friction`` and ``pad_relaxation`` act per contact point of a pad, as factors on the
  friction coefficient and on the spring (``point_scales``);
* ``soft_finger_torsion`` and ``presliding_friction`` replace the pad cells' own tangential friction by
  a patch law at the pad centre: tangential force and torsion about the pad normal, with the bristle
  of LuGre and the soft-finger limit surface (``patch_terms``);
* ``advance`` moves the state (relaxed force ``q`` [pads], bristle ``z`` [pads, 3] in the pad frame)
  after each solved step; ``evaluate`` (no step) leaves it alone.

Hidden per-episode values are drawn from the ``fingertips`` generator in a fixed order, every effect
drawn whether on or off, so switching one effect never changes another's draw (the gap study relies
on it); they go to ``truth.*`` through ``describe`` (``rig.recorder``), never to provenance.
"""

from __future__ import annotations

import math

import numpy as np

from surrogate.rig.effects import (
    FINGERTIP_EFFECTS,
)
from surrogate.rig.effects import (
    load_dependent_friction as ldf,
)
from surrogate.rig.effects import (
    pad_relaxation as relax,
)
from surrogate.rig.effects import (
    presliding_friction as pres,
)
from surrogate.rig.effects import (
    soft_finger_torsion as sft,
)

_MODULES = {"load_dependent_friction": ldf, "soft_finger_torsion": sft, "pad_relaxation": relax,
            "presliding_friction": pres}


class FingertipLaw:
    """The fingertip effects of one episode.

    Args:
      effects: the config's ``effects`` section (validated).
      n_pads: number of fingertip pads.
      dt: s, physics step.  eps: m/s, slip regularization.
      rng: the episode's ``fingertips`` generator.
    """

    def __init__(self, effects: dict, n_pads: int, *, dt: float, eps: float, rng: np.random.Generator):
        self.dt, self.eps = float(dt), float(eps)
        self.drawn = {name: _MODULES[name].draw(effects[name], rng) for name in FINGERTIP_EFFECTS}
        self.on = {name: bool(effects[name]["enabled"]) for name in FINGERTIP_EFFECTS}
        self.cfg = {name: effects[name] for name in FINGERTIP_EFFECTS}
        self.active = any(self.on.values())
        self.patch_friction = self.on["soft_finger_torsion"] or self.on["presliding_friction"]
        self.q = np.zeros(n_pads)  # relaxed force per pad (N)
        self.z = np.zeros((n_pads, 3))  # bristle deflection per pad, pad geom frame (m)
        self.last_ft = np.zeros(n_pads)  # |tangential force| of the last step (N), limit-surface coupling
        self.last_tau = np.zeros(n_pads)  # |torsion| of the last step (N m)

    def describe(self) -> dict:
        """{effect: drawn values} of the enabled fingertip effects (for ``truth``)."""
        return {k: dict(v) for k, v in self.drawn.items() if self.on[k]}

    # ----------------------------------------------------------------- per point

    def stiffness_scale(self, elastic_pad: np.ndarray) -> np.ndarray:
        """[n_pads] factor on each pad's spring (``pad_relaxation``; 1 when off), from its elastic force [n_pads] N."""
        if not self.on["pad_relaxation"]:
            return np.ones(len(self.q))
        return relax.stiffness_scale(self.q, elastic_pad)

    def friction_scale(self, load_pad: np.ndarray) -> np.ndarray:
        """[n_pads] factor on the pads' friction coefficient at their normal loads [n_pads] N (1 when off)."""
        if not self.on["load_dependent_friction"]:
            return np.ones(len(load_pad))
        c = self.cfg["load_dependent_friction"]
        return ldf.friction_scale(load_pad, exponent=self.drawn["load_dependent_friction"]["exponent"],
                                  reference_load=c["reference_load"], min_load=c["min_load"])

    # ----------------------------------------------------------------- per patch

    def torsion_limit(self, f_max: float, load: float, lever) -> float:
        """N m: a pad's largest torsion about its normal: the soft finger's, or the cells' ``sum mu_j f_j |r_j|``
        = ``f_max * lever`` (f_max, load N; lever m, unused with soft torsion)."""
        if not self.on["soft_finger_torsion"]:
            return f_max * lever
        c, d = self.cfg["soft_finger_torsion"], self.drawn["soft_finger_torsion"]
        mu = f_max / load if load > 0 else 0.0
        return float(sft.torsion_limit(mu, load, radius_m=d["radius_m"], exponent=d["exponent"],
                                       reference_load=c["reference_load"]))

    def patch_terms(self, pads, R, n, twist, f_max, load, lever) -> tuple[np.ndarray, np.ndarray, dict]:
        """The pad patches' friction as ``w = w0 - K xi`` in their twists ``xi = (v_centre, w)``.

        Args (Q pad patches):
          pads: [Q] pad indices.  R: [Q, 3, 3] pad geom frames (world).  n: [Q, 3] pad normals (world).
          twist: [Q, 6] this step's object-minus-pad twists at the patch centres.
          f_max: [Q] N, sum of mu_j f_j over each patch's points.  load: [Q] N, sum of f_j.
          lever: [Q] m, the cells' friction-weighted mean lever arm (torsion when soft torsion is off; else unused).
        Returns:
          (K [Q, 6, 6], w0 [Q, 6], state for ``advance``).

        A loop over the two or three pads in plain floats (3-vectors as lists): a numpy call on a
        3-vector costs more than the arithmetic, and this runs every physics step.
        """
        Q = len(pads)
        K, w0 = np.zeros((Q, 6, 6)), np.zeros((Q, 6))
        state = {"pads": pads.tolist(), "R": R.tolist(), "n": n.tolist(), "z": [None] * Q, "alpha": [1.0] * Q}
        slide = self.on["presliding_friction"]
        if slide:
            c, d = self.cfg["presliding_friction"], self.drawn["presliding_friction"]
            zb, tb = d["breakaway_m"], c["damping_time"]
        tw, fms, lds = twist.tolist(), f_max.tolist(), load.tolist()
        for q, pad in enumerate(state["pads"]):
            nq, fm, (vx, vy, vz, wx, wy, wz) = state["n"][q], fms[q], tw[q]
            tm = self.torsion_limit(fm, lds[q], None if lever is None else float(lever[q]))
            vn = vx * nq[0] + vy * nq[1] + vz * nq[2]
            vt = (vx - vn * nq[0], vy - vn * nq[1], vz - vn * nq[2])
            slip = math.sqrt(vt[0] * vt[0] + vt[1] * vt[1] + vt[2] * vt[2])
            spin = wx * nq[0] + wy * nq[1] + wz * nq[2]
            nn = [[nq[i] * nq[j] for j in range(3)] for i in range(3)]
            k_t = a_tau = 0.0
            if slide:
                # LuGre tangential; the ellipse shared through the last step's torsion (lagged one step).
                share = math.sqrt(max(0.0, 1.0 - (self.last_tau[pad] / tm) ** 2)) if tm > 0 else 1.0
                Rq, zl = state["R"][q], self.z[pad].tolist()
                zw = [Rq[i][0] * zl[0] + Rq[i][1] * zl[1] + Rq[i][2] * zl[2] for i in range(3)]
                zn = zw[0] * nq[0] + zw[1] * nq[1] + zw[2] * nq[2]
                zw = [zw[i] - zn * nq[i] for i in range(3)]
                cz, k_t, alpha = pres.bristle_terms(slip, fm * share, breakaway_m=zb, damping_time=tb, dt=self.dt)
                w0[q, :3] = [cz * zi for zi in zw]
                state["z"][q], state["alpha"][q] = zw, alpha
                # torsion: regularized Coulomb with the patch's radius tau_max / f_max
                a_tau = tm / math.sqrt(spin * spin + (self.eps * fm / tm) ** 2) if tm > 0 and fm > 0 else 0.0
                if self.on["soft_finger_torsion"] and fm > 0:  # the bristle's share of the ellipse, lagged likewise
                    a_tau *= math.sqrt(max(0.0, 1.0 - (self.last_ft[pad] / fm) ** 2))
            else:
                k_t, a_tau = sft.limit_surface_damping(fm, tm, slip, spin, self.eps)
            # tangential block k_t (I - n n^T), torsional block a_tau n n^T
            K[q] = [[k_t * ((i == j) - nn[i][j]) for j in range(3)] + [0.0] * 3 for i in range(3)] + \
                [[0.0] * 3 + [a_tau * nn[i][j] for j in range(3)] for i in range(3)]
        return K, w0, state

    def advance(self, state: dict | None, twists_new: np.ndarray, wrenches: np.ndarray, elastic_pad: np.ndarray) -> None:
        """Move the state one step on: bristles by the end-of-step twists [Q, 6] of the patches in ``state``
        (``patch_terms``; None: no pad in contact), the coupling by their solved wrenches [Q, 6], relaxation
        by the pads' elastic forces [n_pads] N. Pads out of contact drop their bristle."""
        touched = [False] * len(self.q)
        if state is not None:
            zb = self.drawn["presliding_friction"]["breakaway_m"]
            tw, ws = twists_new.tolist(), wrenches.tolist()
            for q, pad in enumerate(state["pads"]):
                touched[pad] = True
                nq, w, v = state["n"][q], ws[q], tw[q]
                if state["z"][q] is not None:
                    vn = v[0] * nq[0] + v[1] * nq[1] + v[2] * nq[2]
                    z = pres.bristle_update(state["z"][q], [v[i] - vn * nq[i] for i in range(3)], state["alpha"][q],
                                            breakaway_m=zb, dt=self.dt)
                    Rq = state["R"][q]
                    self.z[pad] = [Rq[0][i] * z[0] + Rq[1][i] * z[1] + Rq[2][i] * z[2] for i in range(3)]  # R^T z
                fn = w[0] * nq[0] + w[1] * nq[1] + w[2] * nq[2]
                f = [w[i] - fn * nq[i] for i in range(3)]
                self.last_ft[pad] = math.sqrt(f[0] * f[0] + f[1] * f[1] + f[2] * f[2])
                self.last_tau[pad] = abs(w[3] * nq[0] + w[4] * nq[1] + w[5] * nq[2])
        for pad, t in enumerate(touched):
            if not t:
                self.z[pad] = 0.0
                self.last_ft[pad] = self.last_tau[pad] = 0.0
        if self.on["pad_relaxation"]:
            d = self.drawn["pad_relaxation"]
            self.q = relax.relax_step(self.q, elastic_pad, fraction=d["fraction"], time_s=d["time_s"], dt=self.dt)
