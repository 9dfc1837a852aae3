"""The capture rig's reference contact law, applied through MuJoCo.

MuJoCo integrates the rigid bodies (hand, object) and keeps its analytic contact
for the finger links and palm (``ana:`` pairs). The contacts the surrogate owns,
fingertip pad vs object and object vs table, are switched to ``external`` (MuJoCo
applies no force there) and this module computes their forces every physics step:

    mj_step1  ->  rig contact forces into data.xfrc_applied (zeroed each step)  ->  mj_step2

(``xfrc_applied`` rather than ``qfrc_applied``: the same generalized forces, but
MuJoCo's force/torque sensors on the pad sites then include the rig's contact.)

Geometry (our own, MuJoCo's detected contacts are not used)
-----------------------------------------------------------
* Pads: a lattice of cells on each pad face (``effects.compliant_pads``); the
  penetration of a cell is the distance along the pad normal back to the object
  surface, from the object's convex pieces as face planes ``n_i . x <= b_i``
  (``penetration_along``). Planes of a piece farther than the pad's radius from
  the pad face are culled first.
* Table: the object's hull vertices plus ``physics.support_samples`` even surface
  samples per piece; penetration ``delta = table_z - z`` for points over the table.
  Object vs ground (only if it falls off the table) stays analytic MuJoCo.

Forces (per point, then summed into one wrench per contact patch)
-----------------------------------------------------------------
The rig's own laws (``rig.contact_law``; nothing from ``surrogate.model``). Normal, pads (the
compliant lattice or one stiff point, ``effects.compliant_pads``): the exponential pulp law with a
Kelvin-Voigt dashpot (``effects.pulp_stiffening``, rig v3), or Hunt-Crossley
``f = k delta^p (1 + c d(delta)/dt) >= 0`` (v1, v2). Normal, table (``physics.support_*``): the
Hertzian spring with Lankarani-Nikravesh damping from each sample point's remembered impact speed
(``effects.impact_damping``, v3; ``_impact_law``), or a constant Hunt-Crossley ``c``. Tangential:
regularized Coulomb with the local coefficient (``effects.friction_map``) shaped by
``effects.stribeck_friction``. The fingertip effects (``rig.fingertips``, on from rig v2) act on the
pads: a spring factor (relaxation), a friction factor (load), and a patch law for the tangential
force and torsion (LuGre bristle, soft-finger limit surface).

Time integration (why it is stable at a 1 ms step)
--------------------------------------------------
Stiff penalty springs and the steep regularized friction (slope ``mu f_n / eps``,
hundreds of N s/m per point) are unstable with an explicit force at any useful
step for a 10 g object. The rig therefore evaluates its forces *semi-implicitly*
in the contact space, like MuJoCo's own implicit damping: with ``J`` the 6-row
Jacobians (object minus pad, at each patch centre), ``W = J M^-1 J^T`` the
patches' mobility and ``K`` the per-patch 6x6 damping of the linearized law
(normal: ``c k delta^p + dt * d(k delta^p)/d(delta)``, the second term is the
backward-Euler treatment of the spring; tangential: ``mu f_n / sqrt(v^2 + eps^2)``),
the wrenches ``w`` solve

    (I + dt K W) w = w0 - K xi_free,   xi_free = J (qvel + dt qacc_smooth)

i.e. they are the law's forces at the end-of-step velocity ``xi_free + dt W w``
(``qacc_smooth``: this step's acceleration without contact, so gravity and the
servos are in the prediction; without it a held object creeps at ``g dt``)
(all patches coupled through the object). The law itself is unchanged; the
scheme only removes the explicit step's instability. The spring's backward-Euler
term adds a numerical damping ``dt k'`` (for the rigid point pad, 50 N s/m at
1 ms), which is small against the Hunt-Crossley damping of the compliant pads.
MuJoCo's ``implicitfast`` actuator damping is not in ``M`` here, so ``W``
overestimates the pads' mobility (more damping, never less).

Measured (rig v1, MuJoCo 4.0.1, 2.5 s approach-close-lift, seed 0, 4 N / 2 N grip): the
default step (120 Hz frames / 9 = 0.926 ms) against 0.245 ms differs by at most
0.40 mm in object position (parallel jaw, box) and 0.22 mm (three fingers,
cylinder), the held pad forces by < 1 mN, and all labels agree; 0.49 ms differs
by 0.17 / 0.12 mm. Cost: ~0.5 ms of Python/numpy per step (about 60 small
vectorized calls) against ~0.03 ms for MuJoCo's own step.

Frames: forces act on the object body at its true COM (``xfrc_applied``), so
MuJoCo's own fingertip force/torque sensors also read the rig's contact.
"""

from __future__ import annotations

import mujoco
import numpy as np

from surrogate.objects.asset import ObjectAsset
from surrogate.rig.contact_law import EXPONENTIAL, POWER, linearized_law, point_batch
from surrogate.rig.effects import compliant_pads, impact_damping, mass_mismatch
from surrogate.rig.effects.actuator_delay_backlash import ActuatorChannel
from surrogate.rig.effects.friction_map import FrictionField
from surrogate.rig.fingertips import FingertipLaw
from surrogate.rig.geometry import (
    Patch,
    cross3,
    hull_planes,
    pad_frames,
    penetration_along,  # noqa: F401  (re-exported: tests and effects use it)
    penetration_batch,
    support_points,
)
from surrogate.scenes import TABLE_HEIGHT, build_scene, set_contact_mode
from surrogate.scenes.builder import TABLE_HALF, Scene
from surrogate.scenes.hands import PAD_HALF
from surrogate.scenes.object_body import OBJECT_BODY
from surrogate.semi_implicit import semi_implicit_solve

_PAD_RADIUS = float(np.hypot(PAD_HALF[1], PAD_HALF[2]))  # m, pad face centre to corner
_MAX_DEPTH = 2 * PAD_HALF[0]  # m, a pad cell's compression saturates at the pad thickness (5 mm)


class RigPhysics:
    """A rig scene: MuJoCo model, data, the reference contact law and the actuator channel.

    Args:
      cfg: validated rig config (``load_rig_config``).
      obj: the nominal object asset.
      hand: ``parallel_jaw``, ``three_finger`` or ``jaco``.
      timestep: s, physics step.
      rngs: name -> ``np.random.Generator`` for ``mass_mismatch``, ``actuator`` and ``fingertips``.
      object_quat: [4] initial orientation (w, x, y, z) of the object on the table.
      grip_force: N, fingertip force bound.
    """

    def __init__(self, cfg: dict, obj: ObjectAsset, *, hand: str, timestep: float, rngs: dict,
                 object_quat=None, grip_force: float | None = None):
        self.cfg = cfg
        self.obj = obj
        phys = cfg["physics"]
        eff = cfg["effects"]
        self.on = {k: bool(v["enabled"]) for k, v in eff.items()}
        self.dt = float(timestep)
        self.scene: Scene = build_scene(obj, hand=hand, setting="table", timestep=self.dt,
                                        object_quat=object_quat, grip_force=grip_force)
        s = self.scene
        # True mass properties (the trace keeps the nominal ones): edit the spec and recompile.
        mm = eff["mass_mismatch"]
        self.true_mass = mass_mismatch.draw_true_mass_properties(
            obj.mass, obj.inertia, mm if self.on["mass_mismatch"] else None, rngs["mass_mismatch"])
        if self.on["mass_mismatch"]:
            mass_mismatch.apply_to_spec(s.spec, OBJECT_BODY, self.true_mass)
            s.model = s.spec.compile()
        m = self.model = s.model
        # MuJoCo detects but applies no force for pads and table; the ground stays analytic.
        set_contact_mode(m, s, "external", roles=("pad-object", "object-table"))
        self.ob = s.object_body_id
        self.data = s.make_data()
        d = self.data

        # Object geometry.
        self.planes = [hull_planes(p) for p in obj.pieces]
        verts = np.concatenate([np.asarray(p.vertices) for p in obj.pieces])
        self.radius = float(np.linalg.norm(verts, axis=1).max())
        self.support = support_points(obj, int(phys["support_samples"]))
        self.field = FrictionField(obj.name, obj.friction, eff["friction_map"] if self.on["friction_map"] else None)
        self.stribeck = eff["stribeck_friction"] if self.on["stribeck_friction"] else None
        self.eps = float(phys["friction_regularization"])

        # Pad law (per cell, or the whole face on the single stiff point): rows (kind, p1, p2, p3), ``rig.contact_law``.
        cp, pulp = eff["compliant_pads"], eff["pulp_stiffening"]
        self.compliant = self.on["compliant_pads"]
        grid = int(cp["grid"])
        cells = grid**2 if self.compliant else 1
        if self.on["pulp_stiffening"]:
            self.pad_law = (EXPONENTIAL, pulp["stiffness"] / cells, pulp["stiffening"], pulp["damping_time"])
        elif self.compliant:
            self.pad_law = (POWER, cp["stiffness"] / grid**2, cp["exponent"], cp["damping"])
        else:
            self.pad_law = (POWER, phys["point_stiffness"], 1.0, phys["point_damping"])
        self.support_law = (POWER, phys["support_stiffness"], phys["support_exponent"], phys["support_damping"])
        # Table: Lankarani-Nikravesh damping from each sample point's remembered impact speed (0: not touching).
        self.impact = eff["impact_damping"] if self.on["impact_damping"] else None
        self.impact_speed = np.zeros(len(self.support))

        # Pads: geom, body, site, the face lattice and the face normal (pad frame).
        self.hand = s.hand
        self.pads = pad_frames(m, d, s.hand, grid)
        self._pad_geoms = np.array([pad["geom"] for pad in self.pads])
        self._pad_sign = np.array([pad["normal"][0] for pad in self.pads])
        self._grids = np.stack([pad["grid"] for pad in self.pads])
        self._near2 = (self.radius + _PAD_RADIUS + 1e-3) ** 2

        # Actuator channel (delay + backlash) on the hand's position actuators.
        self.act_ids = s.hand_actuator_ids
        joints = [m.actuator_trnid[a, 0] for a in self.act_ids]
        is_hinge = [m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE for j in joints]
        adb = eff["actuator_delay_backlash"]
        self.channel = ActuatorChannel(d.ctrl[self.act_ids].copy(), self.dt, is_hinge,
                                       adb if self.on["actuator_delay_backlash"] else None, rngs["actuator"])
        # Fingertip effects (rig v2): hidden draws and per-pad state (``rig.fingertips``).
        self.tips = FingertipLaw(eff, len(self.pads), dt=self.dt, eps=self.eps, rng=rngs["fingertips"])
        self._tip_step = None
        self.patches: list[Patch] = []
        self._jacp = np.zeros((3, m.nv))
        self._jacr = np.zeros((3, m.nv))

    # ------------------------------------------------------------------------- stepping

    def step(self, command: np.ndarray) -> None:
        """One physics step with the script's ``command`` (hand actuator order)."""
        m, d = self.model, self.data
        d.ctrl[self.act_ids] = self.channel(command)
        mujoco.mj_step1(m, d)
        d.xfrc_applied[:] = 0.0
        self._tip_step = None
        self.patches = self._contact_forces(apply=True)
        if self.tips.active:
            t = self._tip_step
            if t is None:  # no contact: bristles drop, relaxation decays
                self.tips.advance(None, np.zeros((0, 6)), np.zeros((0, 6)), np.zeros(len(self.pads)))
            else:
                tip, xi_new, w = t
                self.tips.advance(tip["state"], xi_new[tip["patches"]], w[tip["patches"]], tip["elastic_pad"])
        mujoco.mj_step2(m, d)

    def evaluate(self) -> list[Patch]:
        """The contact patches of the current state without stepping (e.g. at t = 0, after mj_forward)."""
        return self._contact_forces(apply=False)

    # ------------------------------------------------------------------------- contact law

    def _pad_candidates(self):
        """Pad patches in contact, all pads at once (batched over pads and lattice cells)."""
        d = self.data
        xo, Ro = d.xpos[self.ob], d.xmat[self.ob].reshape(3, 3)
        R = d.geom_xmat[self._pad_geoms].reshape(-1, 3, 3)
        nw = R[:, :, 0] * self._pad_sign[:, None]  # pad normals (world), pad -> object
        face_w = d.geom_xpos[self._pad_geoms] + PAD_HALF[0] * nw
        dx = face_w - xo
        near = np.flatnonzero((dx * dx).sum(axis=1) <= self._near2)
        if near.size == 0:
            return []
        Rn = R[near]
        P_w = d.geom_xpos[self._pad_geoms][near][:, None, :] + self._grids[near] @ Rn.transpose(0, 2, 1)
        P_o = (P_w - xo) @ Ro  # [k, cells, 3] object frame
        U_o = nw[near] @ Ro
        depth = penetration_batch(P_o, U_o, dx[near] @ Ro, self.planes, _PAD_RADIUS, _MAX_DEPTH)
        out = []
        for j, i in enumerate(near):
            dj = depth[j]
            act = dj > 0.0
            if not act.any():
                continue
            if self.compliant:
                pw, dep, po = P_w[j][act], dj[act], P_o[j][act]
            else:
                w = compliant_pads.deepest_point_weights(dj[act])
                pw, po = (w @ P_w[j][act])[None], (w @ P_o[j][act])[None]
                dep = np.array([dj[act].max()])
            surf_o = po - dep[:, None] * U_o[j]  # back along the pad normal to the object surface
            out.append(["pad", int(i), self.pads[i]["body"], pw, nw[i], dep, self.pad_law, surf_o])
        return out

    def _table_candidates(self):
        d = self.data
        xo = d.xpos[self.ob]
        if xo[2] - self.radius > TABLE_HEIGHT:  # no point of the object can reach the table
            return []
        Ro = d.xmat[self.ob].reshape(3, 3)
        S_w = xo + self.support @ Ro.T
        depth = TABLE_HEIGHT - S_w[:, 2]
        act = (depth > 0.0) & (np.abs(S_w[:, 0]) <= TABLE_HALF[0]) & (np.abs(S_w[:, 1]) <= TABLE_HALF[1])
        if not act.any():
            return []
        return [["table", -1, -1, S_w[act], np.array([0.0, 0.0, 1.0]), depth[act], self.support_law,
                 self.support[act], act]]

    def _contact_forces(self, *, apply: bool) -> list[Patch]:
        """This step's contact patches, their wrenches solved semi-implicitly (module docstring); with
        ``apply`` added to ``xfrc_applied`` (on the object, and equal and opposite on the pad)."""
        m, d = self.model, self.data
        cands = self._pad_candidates() + self._table_candidates()
        if not cands:
            return []
        dt = self.dt
        # Smooth (contact-free) acceleration of this step, for the end-of-step velocity prediction.
        mujoco.mj_fwdActuation(m, d)
        mujoco.mj_fwdAcceleration(m, d)
        bt = point_batch(cands)
        J = self._patch_jacobians(cands, bt["centres"])
        xi_all = J @ d.qvel
        if self.impact is not None:
            self._impact_law(cands, bt, xi_all, apply=apply)
        xi_free = xi_all + dt * (J @ d.qacc_smooth)
        tips = self.tips if self.tips.active else None
        pad_R = d.geom_xmat[self._pad_geoms].reshape(-1, 3, 3) if tips is not None else None
        K, w0, lazy, tip = linearized_law(bt, xi_all, field=self.field, stribeck=self.stribeck, eps=self.eps,
                                          dt=dt, tips=tips, pad_R=pad_R)
        X = np.zeros_like(J)
        mujoco.mj_solveM(m, d, X, J)
        W = J @ X.T
        P = len(cands)
        w = semi_implicit_solve(K, W, w0.ravel(), xi_free, dt).reshape(P, 6)
        xi_new = (xi_free + dt * W @ w.ravel()).reshape(P, 6)
        if apply and tip is not None:
            self._tip_step = (tip, xi_new, w)
        r, f0, a, b, active = lazy
        patches = []
        lo = 0
        for p, cand in enumerate(cands):
            sl = slice(lo, lo + bt["counts"][p])
            lo += bt["counts"][p]
            patches.append(Patch(cand[0], cand[1], bt["centres"][p], w[p, :3], w[p, 3:], bt["surf"][sl], None,
                                 _lazy=(xi_new[p], r[sl], f0[sl], a[sl], b[sl], bt["normals"][p], active[sl])))
            if apply:
                self._apply_wrench(cand[2], bt["centres"][p], w[p])
        return patches

    def _impact_law(self, cands, bt: dict, xi_all: np.ndarray, *, apply: bool) -> None:
        """Set the table points' damping to ``effects.impact_damping``'s from the approach speed each remembered
        at first touch (this step's for points touching now for the first time); with ``apply`` the memory moves."""
        act = np.zeros(len(self.support), dtype=bool)
        approach = np.zeros(len(self.support))
        if cands[-1][0] == "table":
            p = len(cands) - 1
            lo = int(bt["starts"][p])
            sl = slice(lo, lo + bt["counts"][p])
            xi = xi_all[6 * p:6 * p + 6]
            r = bt["pts"][sl] - bt["centres"][p]
            vz = xi[2] + xi[3] * r[:, 1] - xi[4] * r[:, 0]  # (v + w x r) . z: the table normal is +z
            act = cands[-1][8]
            approach[act] = -vz
        c = self.impact
        memory = impact_damping.remember(self.impact_speed, act, approach, impact_speed_min=c["impact_speed_min"])
        if act.any():
            bt["law"][sl, 3] = impact_damping.damping(memory[act], restitution=c["restitution"])
        if apply:
            self.impact_speed = memory

    def _patch_jacobians(self, cands, centres: np.ndarray) -> np.ndarray:
        """[6 P, nv] each patch's Jacobian at its centre: the object's minus the pad's (the table is fixed)."""
        m, d = self.model, self.data
        J = np.zeros((6 * len(cands), m.nv))
        for p in range(len(cands)):
            mujoco.mj_jac(m, d, self._jacp, self._jacr, centres[p], self.ob)
            J[6 * p:6 * p + 3] = self._jacp
            J[6 * p + 3:6 * p + 6] = self._jacr
            body = cands[p][2]
            if body >= 0:
                mujoco.mj_jac(m, d, self._jacp, self._jacr, centres[p], body)
                J[6 * p:6 * p + 3] -= self._jacp
                J[6 * p + 3:6 * p + 6] -= self._jacr
        return J

    def _apply_wrench(self, body: int, centre: np.ndarray, w: np.ndarray) -> None:
        """Add a patch wrench ``w`` [6] (about ``centre``) to the object and its opposite to ``body`` (if >= 0)."""
        d, ob = self.data, self.ob
        F, T = w[:3], w[3:]
        d.xfrc_applied[ob, :3] += F
        d.xfrc_applied[ob, 3:] += T + cross3(centre - d.xipos[ob], F)
        if body >= 0:
            d.xfrc_applied[body, :3] -= F
            d.xfrc_applied[body, 3:] -= T + cross3(centre - d.xipos[body], F)

    # ------------------------------------------------------------------------- readouts

    def pad_wrenches(self, patches: list[Patch] | None = None) -> np.ndarray:
        """[n_pads, 6] contact force (N) and torque (N m, about the site) on each pad, in its site frame."""
        d = self.data
        patches = self.patches if patches is None else patches
        out = np.zeros((len(self.pads), 6))
        for pt in patches:
            if pt.role != "pad":
                continue
            site = self.pads[pt.index]["site"]
            R = d.site_xmat[site].reshape(3, 3)
            F = -pt.force
            T = -pt.torque + cross3(pt.centre - d.site_xpos[site], F)
            out[pt.index] = np.r_[R.T @ F, R.T @ T]
        return out

    def contact_points(self, patches: list[Patch] | None = None, *, roles=("pad", "table")) -> np.ndarray:
        """[P, 3] object-frame surface points in contact (rig patches and analytic hand-link contacts)."""
        d = self.data
        patches = self.patches if patches is None else patches
        pts = [pt.points for pt in patches if pt.role in roles]
        # Analytic (MuJoCo) contacts of finger links / palm with the object, penetrating.
        xo, Ro = d.xpos[self.ob], d.xmat[self.ob].reshape(3, 3)
        obj_geoms = set(self.scene.object_geom_ids.tolist())
        for i in range(d.ncon):
            con = d.contact[i]
            if con.exclude or con.dist > 0:
                continue
            if con.geom[0] in obj_geoms or con.geom[1] in obj_geoms:
                pts.append(((con.pos - xo) @ Ro)[None])
        return np.concatenate(pts) if pts else np.zeros((0, 3))
