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

import numpy as np

from surrogate.rig.effects import (
    FINGERTIP_EFFECTS,
    load_dependent_friction as ldf,
    pad_relaxation as relax,
    presliding_friction as pres,
    soft_finger_torsion as sft,
)

_EYE3 = np.eye(3)[None]
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

    def torsion_limit(self, f_max, load, lever) -> np.ndarray:
        """[Q] N m: the pads' largest torsion about their normal (soft finger, or the cells' ``sum mu_j f_j |r_j|``
        = ``f_max * lever``), from f_max, load [Q] N and lever [Q] m."""
        f_max, load = np.asarray(f_max, dtype=float), np.asarray(load, dtype=float)
        if not self.on["soft_finger_torsion"]:
            return f_max * np.asarray(lever, dtype=float)
        c, d = self.cfg["soft_finger_torsion"], self.drawn["soft_finger_torsion"]
        mu = np.where(load > 0, f_max / np.where(load > 0, load, 1.0), 0.0)
        return sft.torsion_limit(mu, load, radius_m=d["radius_m"], exponent=d["exponent"],
                                 reference_load=c["reference_load"])

    def patch_terms(self, pads, R, n, twist, f_max, load, lever) -> tuple[np.ndarray, np.ndarray, dict]:
        """The pad patches' friction as ``w = w0 - K xi`` in their twists ``xi = (v_centre, w)``.

        Args (Q pad patches):
          pads: [Q] pad indices.  R: [Q, 3, 3] pad geom frames (world).  n: [Q, 3] pad normals (world).
          twist: [Q, 6] this step's object-minus-pad twists at the patch centres.
          f_max: [Q] N, sum of mu_j f_j over each patch's points.  load: [Q] N, sum of f_j.
          lever: [Q] m, the cells' friction-weighted mean lever arm (torsion when soft torsion is off).
        Returns:
          (K [Q, 6, 6], w0 [Q, 6], state for ``advance``).
        """
        Q = len(pads)
        nn = n[:, :, None] * n[:, None, :]
        Pt = _EYE3 - nn
        v = twist[:, :3]
        v_t = v - (v * n).sum(axis=1)[:, None] * n
        spin = (n * twist[:, 3:]).sum(axis=1)
        slip = np.sqrt((v_t * v_t).sum(axis=1))
        tau_max = self.torsion_limit(f_max, load, lever)
        safe_tau = np.maximum(tau_max, 1e-12)
        K, w0 = np.zeros((Q, 6, 6)), np.zeros((Q, 6))
        state = {"pads": np.asarray(pads), "R": R, "n": n}
        if self.on["presliding_friction"]:
            # LuGre tangential; the ellipse shared through the last step's torsion (lagged one step).
            share = np.sqrt(np.maximum(1.0 - (self.last_tau[pads] / safe_tau) ** 2, 0.0))
            c, d = self.cfg["presliding_friction"], self.drawn["presliding_friction"]
            z = (R @ self.z[pads][:, :, None])[:, :, 0]
            z = z - (z * n).sum(axis=1)[:, None] * n
            f0, k_t, alpha = pres.bristle_terms(z, slip, f_max * share, breakaway_m=d["breakaway_m"],
                                                damping_time=c["damping_time"], dt=self.dt)
            K[:, :3, :3] = k_t[:, None, None] * Pt
            w0[:, :3] = f0
            state.update(z=z, alpha=alpha)
            # torsion: regularized Coulomb with the patch's radius tau_max / f_max
            a_tau = tau_max / np.sqrt(spin ** 2 + (self.eps * f_max / safe_tau) ** 2 + 1e-300)
            if self.on["soft_finger_torsion"]:
                a_tau = a_tau * np.sqrt(np.maximum(1.0 - (self.last_ft[pads] / np.maximum(f_max, 1e-12)) ** 2, 0.0))
        else:
            a_t, a_tau = sft.limit_surface_damping(f_max, tau_max, slip, spin, self.eps)
            K[:, :3, :3] = a_t[:, None, None] * Pt
        K[:, 3:, 3:] = a_tau[:, None, None] * nn
        return K, w0, state

    def advance(self, state: dict | None, twists_new: np.ndarray, wrenches: np.ndarray, elastic_pad: np.ndarray) -> None:
        """Move the state one step on: bristles by the end-of-step twists [Q, 6] of the patches in ``state``
        (``patch_terms``; None: no pad in contact), the coupling by their solved wrenches [Q, 6], relaxation
        by the pads' elastic forces [n_pads] N. Pads out of contact drop their bristle."""
        touched = np.zeros(len(self.q), bool)
        if state is not None and len(state["pads"]):
            pads, n = state["pads"], state["n"]
            touched[pads] = True
            if "z" in state:
                v_t = twists_new[:, :3] - (twists_new[:, :3] * n).sum(axis=1, keepdims=True) * n
                d = self.drawn["presliding_friction"]
                z = pres.bristle_update(state["z"], v_t, state["alpha"], breakaway_m=d["breakaway_m"], dt=self.dt)
                self.z[pads] = (state["R"].transpose(0, 2, 1) @ z[:, :, None])[:, :, 0]
            w_t = wrenches[:, :3] - (wrenches[:, :3] * n).sum(axis=1, keepdims=True) * n
            self.last_ft[pads] = np.sqrt((w_t * w_t).sum(axis=1))
            self.last_tau[pads] = np.abs((wrenches[:, 3:] * n).sum(axis=1))
        self.z[~touched] = 0.0
        self.last_ft[~touched] = 0.0
        self.last_tau[~touched] = 0.0
        if self.on["pad_relaxation"]:
            d = self.drawn["pad_relaxation"]
            self.q = relax.relax_step(self.q, elastic_pad, fraction=d["fraction"], time_s=d["time_s"], dt=self.dt)
