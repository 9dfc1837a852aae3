"""The differentiable twin of an articulated object (several links and joints: ``scenes.articulated_body``).

``sim.twin`` integrates one free rigid body; an articulated object (e.g. the DAIR Lab's two-link elbow) moves in its
generalized coordinates: the base link's free joint and the joints between its links. Every physics step, for B
environments at once:

1. the object's coordinates (detached) are written into a scratch ``MjData`` per environment, the other bodies at
   their recorded configuration, and MuJoCo runs the first half of its step (``mj_step1``, then the smooth
   acceleration: ``mj_fwdActuation``, ``mj_fwdAcceleration``), as the hybrid stepper does;
2. the contacts of every link are read by the stepper's ``LinkGraphBuilder``, with their relative-velocity Jacobians
   (``law_solve.contact_jacobians``) and the joint-space inertia, restricted to the object's dofs (n = 6 + J);
3. the contacts are attached to the differentiable state: each contact's velocity is ``J v`` (the dofs of the link it
   touches), and its signed distance is linearized around MuJoCo's value, ``d = d0 + n . (J dq)`` with ``dq`` the
   state's displacement from the detached one (zero in value: MuJoCo's distance, differentiable in the pose);
4. the law (``ContactLawGNN.law_terms`` at those velocities) is solved in the object's joint space
   (``joint_solve.solve_joint``: ``M`` couples the links through the joints), and the coordinates take MuJoCo's
   semi-implicit Euler step with ``J^T F`` applied (``v' = v_free + dt M^-1 J^T F``): the base position by ``v'``,
   its orientation by ``exp(dt w')`` (body axes, as ``mj_integratePos``), each joint by ``dt`` times its rate.

Gradients reach the law through every step's forces, and the trajectory through the joints: a force on one link
moves every link through ``M^-1``, a changed joint angle moves the next contacts' depth through ``J``. With gradients
on, each step also carries the configuration's first order of what MuJoCo holds fixed within it, from MuJoCo's own
finite differences at the step's state (zero in value): the smooth dynamics (gravity on the links, Coriolis:
``mjd_transitionFD``) and the joint-space inertia ``M(q)`` (``mj_crb``), so a joint angle changes how hard a contact
pushes each link, and the contact points' Jacobians (``mj_jac`` at each point riding on its link), so a turning link
changes how its points slide. Left out: where MuJoCo places a contact point (midway through the penetration, so a
translation moves it by half the depth change: about 5 % of a contact step's derivative in height, measured against
finite differences of the whole step) and the angular Jacobians' first order (torsion and rolling). These terms are
computed only where they carry a gradient: with ``torch.no_grad``, or before anything in the state depends on a
parameter (free flight to the first contact when ``state0`` needs no gradient), they are skipped.

Objects the twin steps: joints that are hinges or slides, without limits, damping, friction loss or equality
constraints (which MuJoCo's step would add and the joint-space solve would not see); anything else is refused by
name (``check_articulation``). The values are the stepper's: with the same law the twin and the
hybrid stepper produce the same trajectory (``tests/test_elbow_twin.py`` states the tolerance).

Shapes: B environments, J object joints, n = 6 + J object dofs, E contacts, F frames, S = (F - 1) * substeps.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from ..errors import ConfigError
from ..model.contact_graph import concat_graphs
from ..model.history import ContactHistory, ContactState, concat_keys, contact_keys
from ..model.joint_solve import solve_joint
from ..model.law import cross
from ..model.presliding import contact_state_after
from ..quat import quat_mul, quat_to_mat
from .law_solve import angular_jacobians, contact_jacobians
from .rigid_body import integrate_pose
from .twin import _scene_groups, body_forces


def object_columns(scene) -> tuple[np.ndarray, np.ndarray]:
    """(qpos columns [7 + J], dof columns [6 + J]) of an articulated object in its scene's model: the base link's free
    joint, then its joints in the scene's order (``Scene.meta``)."""
    qa, da = scene.object_qpos_adr, scene.object_dof_adr
    q = np.r_[np.arange(qa, qa + 7), np.asarray(scene.meta["object_joint_qpos_adr"], dtype=np.int64)]
    v = np.r_[np.arange(da, da + 6), np.asarray(scene.meta["object_joint_dof_adr"], dtype=np.int64)]
    return q.astype(np.int64), v.astype(np.int64)


def check_articulation(m: mujoco.MjModel, scene) -> None:
    """Refuse, by joint name, an articulated object the twin cannot step like MuJoCo: a joint other than a hinge or a
    slide (after the base link's free joint), a limited joint, joint damping or friction loss, or an equality
    constraint (each adds a force of MuJoCo's own that the joint-space solve does not see)."""
    for j in scene.meta["object_joint_qpos_adr"]:
        jid = int(np.flatnonzero(m.jnt_qposadr == j)[0])
        name, dof = m.joint(jid).name, m.jnt_dofadr[jid]
        kinds = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
        problems = (["not a hinge or a slide"] if int(m.jnt_type[jid]) not in kinds else []) + \
            (["limited"] if m.jnt_limited[jid] else []) + (["damped"] if m.dof_damping[dof] else []) + \
            (["with friction loss"] if m.dof_frictionloss[dof] else [])
        if problems:
            raise ConfigError(f"the differentiable twin steps hinges and slides without limits, damping or friction "
                              f"loss; joint {name!r} is {', '.join(problems)}", key="object joints")
    if m.neq:
        raise ConfigError("the differentiable twin steps objects without equality constraints; this model has "
                          f"{m.neq}", key="object joints")


def link_rollout(contact_model, twins: list, state0: torch.Tensor, n_frames: int, *, substeps: int, qpos=None,
                 qvel=None, detach_every: int = 0, force_bodies=None):
    """Roll out B articulated objects, each in its own twin's scene (``twin.rollout``'s contract; the twins' objects
    have the same number of joints); differentiable in ``state0`` and the contact model.

    Args:
      state0: [B, 13 + 2J] float64: the base link's position (3, world), quaternion (4, w x y z), velocity (3, world)
        and angular velocity (3, body), then the J joint positions and the J joint rates.
      Others as ``twin.rollout``.
    Returns:
      (pos [B, F, 3], quat [B, F, 4], joints [B, F, J]) of the base link and the joints at the frame times; with
      ``force_bodies`` also the pad forces [B, F, P, 3].
    """
    for tw in {id(t): t for t in twins}.values():
        check_articulation(tw.m, tw.scene)
    cols = [object_columns(tw.scene) for tw in twins]
    J = len(cols[0][1]) - 6
    if any(len(c[1]) != J + 6 for c in cols) or state0.shape[-1] != 13 + 2 * J:
        raise ConfigError(f"an articulated rollout needs objects with the same joints and state0 [B, 13 + 2J] "
                          f"(J = {J}), got state0 {tuple(state0.shape)}", key="state0")
    groups, datas = _scene_groups(twins)
    pos, quat = state0[:, :3], state0[:, 3:7]
    joints, v = state0[:, 13:13 + J], torch.cat([state0[:, 7:13], state0[:, 13 + J:]], dim=-1)
    fb = None if force_bodies is None else torch.as_tensor(np.asarray(force_bodies, dtype=np.int64))
    out = [(pos, quat, joints)]
    pads = [] if fb is None else [pos.new_zeros(fb.shape[0], fb.shape[1], 3)]
    stateful = getattr(contact_model, "presliding", False) or getattr(contact_model, "history", False)
    history = ContactHistory() if stateful else None
    for s in range((n_frames - 1) * substeps):
        state = (pos, quat, joints, v)
        want_grad = torch.is_grad_enabled() and any(x.requires_grad for x in state)
        step = _mujoco_half(groups, datas, cols, state, s, qpos, qvel, history is not None, want_grad,
                            getattr(contact_model, "patch", None))
        forces, v = _solve(contact_model, step, state, history)
        dt = step["dt"][:, None]
        pos, quat = integrate_pose(pos, quat, v[:, :3], v[:, 3:6], dt)
        joints = joints + dt * v[:, 6:]
        if (s + 1) % substeps == 0:
            out.append((pos, quat, joints))
            if fb is not None:
                pads.append(body_forces(step["graph"], forces, fb))
            if detach_every > 0 and (len(out) - 1) % detach_every == 0:
                pos, quat, joints, v = pos.detach(), quat.detach(), joints.detach(), v.detach()
    res = tuple(torch.stack(x, 1) for x in zip(*out))
    return res if fb is None else (*res, torch.stack(pads, 1))


def _flow(m: mujoco.MjModel, d: mujoco.MjData, vc: np.ndarray) -> np.ndarray:
    """[n, 2n] the derivative of the contact-free end-of-step velocity of the object's dofs in their position (tangent
    space) and velocity: MuJoCo's own transition derivative (``mjd_transitionFD``, centred; the owned pairs are
    external, so no contact force is in it): gravity on the links, Coriolis. That is ``v + dt qacc_smooth``'s for the
    objects ``check_articulation`` admits (no constraint of MuJoCo's own acts on them)."""
    nv = m.nv
    A = np.zeros((2 * nv + m.na, 2 * nv + m.na))
    mujoco.mjd_transitionFD(m, d, 1e-6, True, A, None, None, None)
    rows = nv + vc
    return np.concatenate([A[rows][:, vc], A[rows][:, nv + vc]], axis=1)


def _slopes(m: mujoco.MjModel, d: mujoco.MjData, vc: np.ndarray, points: np.ndarray, chains: np.ndarray,
            bodies: np.ndarray, eps: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """How the step's matrices move with the configuration, by centred differences along each tangent direction k of
    the object's dofs: ``dM`` [n, n, n] (``dM[..., k]``: the joint-space inertia, MuJoCo's ``mj_crb``) and ``dJ``
    [C, 3, n, n] (the velocity Jacobians of C contact ``points`` [C, 3] riding on their ``bodies`` [C], whose dof
    chains over the object's dofs are ``chains`` [C, n], as ``mj_jac`` builds them from ``cdof``): a joint angle
    changes how hard a contact pushes each link and which way each link's points move. Restores ``qpos``; the derived
    quantities are left perturbed (``_mujoco_half`` reads nothing from the MjData after the finite differences)."""
    n = len(vc)
    q0, dq, full = d.qpos.copy(), np.zeros(m.nv), np.zeros((m.nv, m.nv))
    block, root = np.ix_(vc, vc), m.body_rootid[m.dof_bodyid[vc]]
    local = np.einsum("cji,cj->ci", d.xmat[bodies].reshape(-1, 3, 3), points - d.xpos[bodies])  # in body axes
    dM, dJ = np.zeros((n, n, n)), np.zeros((len(points), 3, n, n))
    free = m.jnt_type[m.dof_jntid[vc]] == mujoco.mjtJoint.mjJNT_FREE
    for k, dof in enumerate(vc):
        if free[k] and dof - m.jnt_dofadr[m.dof_jntid[dof]] < 3:
            continue  # a translation of the whole object moves neither its inertia nor its points' Jacobians
        for sign in (1.0, -1.0):
            d.qpos[:], dq[:] = q0, 0.0
            dq[dof] = sign * eps
            mujoco.mj_integratePos(m, d.qpos, dq, 1.0)
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            mujoco.mj_crb(m, d)
            mujoco.mj_fullM(m, d, full)
            dM[:, :, k] += sign * full[block] / (2 * eps)
            moved = d.xpos[bodies] + np.einsum("cij,cj->ci", d.xmat[bodies].reshape(-1, 3, 3), local)
            cd = d.cdof[vc]  # [n, 6] (angular, linear)
            cols = cd[None, :, 3:] + cross(cd[None, :, :3], moved[:, None, :] - d.subtree_com[root][None])
            dJ[..., k] += sign * (chains[..., None] * cols).transpose(0, 2, 1) / (2 * eps)
    d.qpos[:] = q0
    return dM, dJ


def _mujoco_half(groups, datas, cols, state, s: int, qpos, qvel, keyed: bool, want_grad: bool, patch=None) -> dict:
    """Steps 1-2 of the module docstring for every environment: MuJoCo's first half step at the detached state and the
    contacts' tables (numpy, restricted to the object's dofs). Returns {graph, env [E], J [E, 3, n], Jw [E, 3, n],
    u_oth, w_oth [E, 3] (the other body's point and angular velocity, held for the step), M [B, n, n], acc [B, n] (the
    smooth acceleration), dt [B], keys (``history.ContactKeys`` or None)}; ``patch``: the law's patches
    (``ContactLawGNN.patch``: their points at their centres) or None; with ``want_grad`` also the configuration's
    first order: flow [B, n, 2n] (``_flow``), slope [B, n, n, n] and dJ [E, 3, n, n] (``_slopes``), else None."""
    pos, quat, joints, v = (x.detach().numpy() for x in state)
    q_obj = np.concatenate([pos, quat, joints], axis=-1)
    out = {k: [] for k in ("graph", "env", "J", "Jw", "u_oth", "w_oth", "M", "acc", "dt", "keys", "flow", "slope",
                           "dJ")}
    for (tw, idx), ds in zip(groups, datas):
        m, (qc, vc) = tw.m, cols[idx[0]]
        for i, d in zip(idx, ds):
            d.qpos[:] = m.qpos0 if qpos is None else qpos[i][s]
            d.qvel[:] = 0.0 if qvel is None else qvel[i][s]
            d.qpos[qc], d.qvel[vc] = q_obj[i], v[i]
            d.qfrc_applied[:] = 0.0
            mujoco.mj_step1(m, d)
            mujoco.mj_fwdActuation(m, d)
            mujoco.mj_fwdAcceleration(m, d)
        cb = tw.builder.build(m, ds, dtype=torch.float64, dynamics=True, patch=patch)
        out["graph"].append(cb.graph)
        take, nonzero = tw.builder.M_take
        out["M"].append(np.where(nonzero, cb.dynamics[2][:, take], 0.0)[:, vc][:, :, vc])
        out["acc"].append(np.stack([d.qacc_smooth[vc] for d in ds]))
        out["dt"].append(np.full(len(ds), m.opt.timestep))
        if keyed:
            out["keys"].append(contact_keys(cb, tw.builder.length, env_offset=idx[0]))
        if cb.num_contacts:
            _contact_rows(out, tw.builder, cb, vc, idx[0])
        if want_grad:  # last: the finite differences move the MjData's derived quantities (and the batch's views)
            _first_order(out, tw, ds, cb, vc)
    n = len(cols[0][1])
    empty = {"env": (0,), "J": (0, 3, n), "Jw": (0, 3, n), "u_oth": (0, 3), "w_oth": (0, 3), "dJ": (0, 3, n, n)}
    step = {k: torch.from_numpy(np.concatenate(x)) if x else None for k, x in out.items() if k not in ("graph", "keys")}
    step.update({k: torch.zeros(shape, dtype=torch.float64) for k, shape in empty.items()
                 if step[k] is None and (k != "dJ" or want_grad)})
    step["env"] = step["env"].long()
    step["graph"] = concat_graphs(out["graph"])
    step["keys"] = concat_keys(out["keys"]) if keyed else None
    return step


def _first_order(out: dict, tw, ds, cb, vc: np.ndarray) -> None:
    """Append the configuration's first order of a batch's step to ``out``: ``flow`` [B, n, 2n] (``_flow``), ``slope``
    [B, n, n, n] and the contacts' ``dJ`` [E, 3, n, n] (``_slopes``)."""
    cs = cb.contact_set
    points, bodies = np.array(cb.dynamics[0]), tw.builder.geom_body[cs.g_obj]
    chains = tw.builder.body_chain[bodies][:, vc]
    dJ = np.zeros((len(points), 3, len(vc), len(vc)))
    slope = []
    for i, d in enumerate(ds):
        rows = np.flatnonzero(cs.env == i)
        if not len(rows):  # no contact: M is not used this step
            slope.append(np.zeros((len(vc),) * 3))
            continue
        dM, dJ[rows] = _slopes(tw.m, d, vc, points[rows], chains[rows], bodies[rows])
        slope.append(dM)
    out["slope"].append(np.stack(slope))
    out["dJ"].append(dJ)
    out["flow"].append(np.stack([_flow(tw.m, d, vc) for d in ds]))


def _contact_rows(out: dict, builder, cb, vc: np.ndarray, env0: int) -> None:
    """Append a batch's E contacts to ``out``: their environments ``env`` [E] (offset by ``env0``), the object columns
    of their relative (angular) velocity Jacobians ``J``, ``Jw`` [E, 3, n], and the other body's point and angular
    velocity ``u_oth``, ``w_oth`` [E, 3] (``-J_other qvel_other``), held for the step."""
    Jc, Jw, qv = contact_jacobians(builder, cb), angular_jacobians(builder, cb), cb.dynamics[3]
    env = cb.contact_set.env
    other = np.setdiff1d(np.arange(Jc.shape[2]), vc)
    out["env"].append(env + env0)
    for key, Jx in (("J", Jc), ("Jw", Jw)):
        out[key].append(Jx[:, :, vc])
        out["u_oth" if key == "J" else "w_oth"].append(-np.einsum("eiv,ev->ei", Jx[:, :, other], qv[env][:, other]))


def _displacement(pos, quat, joints) -> torch.Tensor:
    """[B, n] the state's displacement from its detached value in the dofs' tangent space: zero in value, the
    identity in gradient (position, body-axes rotation ``2 vec(q0* q)``, joints)."""
    q0 = quat.detach()
    rel = quat_mul(q0 * q0.new_tensor([1.0, -1.0, -1.0, -1.0]), quat)
    return torch.cat([pos - pos.detach(), 2.0 * rel[:, 1:], joints - joints.detach()], dim=-1)


def _solve(contact_model, step: dict, state, history):
    """Steps 3-4 of the module docstring: ``(forces [E, 3] on the object, v' [B, n])``."""
    pos, quat, joints, v = state
    env, Jc, g = step["env"], step["J"], step["graph"]
    dt = step["dt"][:, None]
    v_free, M = v + dt * step["acc"], step["M"]
    moved = _displacement(pos, quat, joints)  # [B, n]
    if step["flow"] is not None:  # the configuration's first order (zero in value): smooth dynamics and inertia
        v_free = v_free.detach() + torch.einsum("bij,bj->bi", step["flow"], torch.cat([moved, v - v.detach()], dim=-1))
        M = M + torch.einsum("bijk,bk->bij", step["slope"], moved)
    if not len(env):
        if history is not None:
            history.store(step["keys"], ContactState.zeros(0))
        return v.new_zeros(0, 3), v_free
    ve = v[env]
    h = type(g)(**vars(g))
    dq = moved[env]
    h.dist = g.dist + (g.normal * torch.einsum("eij,ej->ei", Jc, dq)).sum(-1)
    if step["dJ"] is not None:  # the points ride on their links: J's first order (zero in value)
        Jc = Jc + torch.einsum("eijk,ek->eij", step["dJ"], dq)
    R = quat_to_mat(quat)
    obj = g.object_index
    node_vel = g.vel.index_copy(0, obj, v[:, :3])
    node_om = g.omega.index_copy(0, obj, torch.einsum("bij,bj->bi", R, v[:, 3:6]))
    # the object's point and angular velocity (its dofs' columns of the relative Jacobians); the relative ones are
    # these minus the other body's, held for the step
    u_obj, w_obj = torch.einsum("eij,ej->ei", Jc, ve), torch.einsum("eij,ej->ei", step["Jw"], ve)
    state_in = None
    if history is not None:
        state_in = ContactState(*(torch.from_numpy(x) for x in history.lookup(step["keys"])))
    t = contact_model.law_terms(h, node_vel, node_om, state=state_in,
                                contact_vel=(u_obj, step["u_oth"], w_obj, step["w_oth"]))
    spin = t["spin"]
    if spin is not None:
        spin = spin._replace(Jw=step["Jw"], w_other=step["w_oth"])
    dt_e = step["dt"][env]
    F, _, u = solve_joint(t["w0"], t["a"], t["b"], t["n"], Jc, env, M, v_free, dt_e, mu=t["mu"],
                           eps=t["eps"], iterations=int(getattr(contact_model, "friction_iterations", 0)),
                           a_spring=t["a_spring"], u_other=step["u_oth"], spin=spin)
    forces = F[:, :3]
    # the step MuJoCo takes with J^T F (+ J_w^T T) applied: v' = v_free + dt M^-1 J^T F, the solve's own v' in exact
    # arithmetic and the stepper's to rounding (a stiff contact would amplify the solve's rounding)
    qfrc = torch.zeros_like(v).index_add(0, env, torch.einsum("eiv,ei->ev", Jc, forces))
    if spin is not None:
        qfrc = qfrc.index_add(0, env, torch.einsum("eiv,ei->ev", step["Jw"], F[:, 3:]))
    v1 = v_free + dt * torch.linalg.solve(M, qfrc[..., None])[..., 0]
    if history is not None:
        E = len(env)
        z, kz = (forces.new_zeros(E, 3), forces.new_zeros(E)) if t["kz"] is None else (t["z"], t["kz"])
        after = contact_state_after(z, u[:, :3], t["n"], kz, t["mu"], forces, state_in.age, dt_e)
        history.store(step["keys"], ContactState(*(x.detach().numpy() for x in (*after, kz))))
    return forces, v1
