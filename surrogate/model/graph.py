"""The contact graph's fields and the network's features of them (the graph itself: ``batch_graph.GraphBuilder``).

One graph per (environment, time step). Nodes are the bodies that take part in owned
contacts (node 0 of every graph is the object); every contact candidate MuJoCo reports
on an owned pair within the detection distance is one directed edge ``other -> object``
(several parallel edges between the same two bodies are normal: a box on the ground has
up to 4). The graphs of many environments form one batched graph.

Graphs carry *raw geometry* only, as vectors relative to the bodies (nothing that
depends on where the scene is in the world), in SI units::

    edge_index [2, E]  (other body node, object node)
    normal     [E, 3]  unit normal pointing from the other body into the object
                       (the direction in which a compressive contact force pushes the object)
    dist       [E]     signed distance (m), negative = penetration (MuJoCo's ``contact.dist``)
    r_obj      [E, 3]  contact point minus the object's COM (m, world axes)
    r_oth      [E, 3]  contact point minus the other body's COM (m); 0 for static bodies
    tangent    [E, 3]  MuJoCo's first contact tangent (only a tie-break for the reported frame)
    geom_obj, geom_oth [E, 12]  per-side shape descriptor (``GEOM_DESC``)
    vel, omega [N, 3]  node COM linear and angular velocity (m/s, rad/s, world axes)
    mass       [N]     kg (0 for static bodies);  inertia [N, 3] principal moments (kg m^2)
    static     [N]     1 for bodies welded to the world;  is_object [N]
    gravity    [G, 3]  m/s^2;  length [G] object size L (m);  mass_ref [G] object mass (kg)
    object_index [G]   node index of each graph's object (incremented by PyG when batching)

The network (``surrogate.model.contact_law``) turns these into nondimensional features with
``edge_features`` / ``node_features`` (differentiable torch, so the twin's rollouts can move
the contacts), using L, V = sqrt(|g| L) and F0 = m |g| as units:

Edge features (``EDGE_FEATURES``, 41): with n the normal, v = relative velocity of the
object's material point over the other body's at the contact, w = relative angular
velocity, x_t = x - (x.n) n, gh = g/|g|:
  d/L, v.n/V, |v_t|/V, r_obj.n/L, |r_obj_t|/L, r_oth.n/L, |r_oth_t|/L, (w.n) L/V, |w_t| L/V,
  gh.n, |gh_t|, (v_t.r_t)/(V L), n.(r_t x v_t)/(V L), gh_t.v_t/V, n.(gh_t x v_t)/V,
  gh_t.r_t/L, n.(gh_t x r_t)/L  (r_t = r_obj_t), then the object's and the other side's
  geom descriptors (type one-hot of 8, bounding radius / L, sorted AABB half-sizes / L).
Node features (``NODE_FEATURES``, 9): static, is_object, log(m / m_ref) (0 if static),
  sorted principal inertia / (m L^2) (0 if static), |v|/V, v.gh/V, |w| L/V.

Every feature is a rotation invariant (dot products, norms, and triple products with the
normal), so translating or rotating the whole scene with gravity leaves them unchanged.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

GEOM_TYPES = ("plane", "sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh", "other")
_MJ_TYPE = {
    int(mujoco.mjtGeom.mjGEOM_PLANE): 0, int(mujoco.mjtGeom.mjGEOM_SPHERE): 1,
    int(mujoco.mjtGeom.mjGEOM_CAPSULE): 2, int(mujoco.mjtGeom.mjGEOM_ELLIPSOID): 3,
    int(mujoco.mjtGeom.mjGEOM_CYLINDER): 4, int(mujoco.mjtGeom.mjGEOM_BOX): 5,
    int(mujoco.mjtGeom.mjGEOM_MESH): 6,
}
GEOM_DESC = tuple(f"type_{t}" for t in GEOM_TYPES) + ("rbound", "half_min", "half_mid", "half_max")
EDGE_SCALARS = (
    "dist", "vn", "vt", "robj_n", "robj_t", "roth_n", "roth_t", "wn", "wt", "gn", "gt",
    "vt_dot_rt", "vt_cross_rt", "gt_dot_vt", "gt_cross_vt", "gt_dot_rt", "gt_cross_rt",
)
EDGE_FEATURES = EDGE_SCALARS + tuple(f"obj_{g}" for g in GEOM_DESC) + tuple(f"oth_{g}" for g in GEOM_DESC)
NODE_FEATURES = ("static", "is_object", "log_mass_ratio", "inertia_0", "inertia_1", "inertia_2", "speed", "v_up", "spin")
FEATURE_VERSION = 1


def geom_descriptor(model: mujoco.MjModel, geom_id: int) -> np.ndarray:
    """[12] shape descriptor of one geom in metres (the model divides by L): one-hot type, rbound, sorted AABB half-sizes."""
    out = np.zeros(len(GEOM_DESC))
    t = _MJ_TYPE.get(int(model.geom_type[geom_id]), 7)
    out[t] = 1.0
    if t != 0:  # a plane has no size
        out[8] = model.geom_rbound[geom_id]
        out[9:12] = np.sort(model.geom_aabb[geom_id, 3:6])
    return out


def _edge_graph(g):
    """[E] graph id of each edge."""
    batch = getattr(g, "batch", None)
    if batch is None:
        return torch.zeros(g.edge_index.shape[1], dtype=torch.long, device=g.edge_index.device)
    return batch[g.edge_index[1]]


def _dot(a, b):
    """[E, 1] the row-wise dot products of [E, 3] a and b: the products summed by a matmul with ones, ~13x faster than
    ``(a * b).sum(-1)`` on 3,000 rows (torch's reduction over a last dimension of 3 is slow) and the same sums."""
    return (a * b) @ a.new_ones(3, 1)


def _tan(x, n):
    return x - _dot(x, n) * n


def relative_velocity(g, vel=None, omega=None):
    """([E, 3] relative velocity of the object's point over the other body's at the contact, [E, 3] relative spin)."""
    vel = g.vel if vel is None else vel
    omega = g.omega if omega is None else omega
    s, o = g.edge_index
    va = vel[o] + torch.cross(omega[o], g.r_obj, dim=-1)
    vb = vel[s] + torch.cross(omega[s], g.r_oth, dim=-1)
    return va - vb, omega[o] - omega[s]


def units(g):
    """Per-graph (L [G], V [G], F0 [G]): length, velocity sqrt(|g| L) and force m |g| scales."""
    gn = g.gravity.norm(dim=-1).clamp_min(1e-6)
    return g.length, torch.sqrt(gn * g.length), g.mass_ref * gn


def edge_features(g, vel=None, omega=None) -> torch.Tensor:
    """[E, 41] nondimensional, rotation- and translation-invariant contact features (``EDGE_FEATURES``)."""
    eg = _edge_graph(g)
    L, V, _ = units(g)
    L, V = L[eg, None], V[eg, None]
    gh = g.gravity / g.gravity.norm(dim=-1, keepdim=True).clamp_min(1e-6)
    gh = gh[eg]
    n = g.normal
    v, w = relative_velocity(g, vel, omega)
    vt, rt, gt = _tan(v, n), _tan(g.r_obj, n), _tan(gh, n)
    dot = _dot
    trip = lambda a, b: dot(n, torch.cross(a, b, dim=-1))  # noqa: E731
    nrm = lambda a: torch.sqrt(_dot(a, a) + 1e-12)  # noqa: E731
    scal = torch.cat([
        g.dist[:, None] / L, dot(v, n) / V, nrm(vt) / V, dot(g.r_obj, n) / L, nrm(rt) / L,
        dot(g.r_oth, n) / L, nrm(_tan(g.r_oth, n)) / L, dot(w, n) * L / V, nrm(_tan(w, n)) * L / V,
        dot(gh, n), nrm(gt), dot(vt, rt) / (V * L), trip(rt, vt) / (V * L), dot(gt, vt) / V, trip(gt, vt) / V,
        dot(gt, rt) / L, trip(gt, rt) / L,
    ], dim=-1)

    def geo(d):
        return torch.cat([d[:, :8], d[:, 8:] / L], dim=-1)

    return torch.cat([scal, geo(g.geom_obj), geo(g.geom_oth)], dim=-1)


# Per-contact history features (``ContactLawGNN`` with ``history``; the state is ``model.history``'s): the presliding
# displacement |z| / L, its alignment with the slip z . v_t / (L V), the time under load age V / L (clipped: a contact
# held for seconds is "old", the exact count does not matter) and the last step's normal force f_n / F0.
HISTORY_FEATURES = ("z_norm", "z_dot_vt", "age", "fn_last")
HISTORY_AGE_CLIP = 100.0


def history_features(g, z, age, fn_last, vel=None, omega=None) -> torch.Tensor:
    """[E, 4] nondimensional, invariant history features (``HISTORY_FEATURES``) of the contacts of ``g``.

    ``z`` [E, 3] the stored presliding displacement in world axes (m; it turns with the other body, so it is as
    invariant as the other vectors), ``age`` [E] time under load (s), ``fn_last`` [E] last normal force (N)."""
    eg = _edge_graph(g)
    L, V, F0 = (u[eg] for u in units(g))
    v, _ = relative_velocity(g, vel, omega)
    vt = _tan(v, g.normal)
    z = z.to(vt.dtype)
    return torch.stack([torch.sqrt((z * z).sum(-1) + 1e-30) / L, (z * vt).sum(-1) / (L * V),
                        (age.to(vt.dtype) * V / L).clamp(0.0, HISTORY_AGE_CLIP), fn_last.to(vt.dtype) / F0], dim=-1)


def node_features(g, vel=None, omega=None) -> torch.Tensor:
    """[N, 9] nondimensional, invariant body features (``NODE_FEATURES``)."""
    vel = g.vel if vel is None else vel
    omega = g.omega if omega is None else omega
    batch = getattr(g, "batch", None)
    nb = torch.zeros(g.num_nodes, dtype=torch.long, device=vel.device) if batch is None else batch
    L, V, _ = units(g)
    L, V, M = L[nb, None], V[nb, None], g.mass_ref[nb, None]
    gh = (g.gravity / g.gravity.norm(dim=-1, keepdim=True).clamp_min(1e-6))[nb]
    st = g.static[:, None]
    mass = g.mass[:, None]
    logm = torch.where(st > 0, torch.zeros_like(mass), torch.log(mass.clamp_min(1e-9) / M))
    inert = torch.where(st > 0, torch.zeros_like(g.inertia), g.inertia / (mass.clamp_min(1e-9) * L * L))
    speed = torch.sqrt(_dot(vel, vel) + 1e-12) / V
    spin = torch.sqrt(_dot(omega, omega) + 1e-12) * L / V
    return torch.cat([st, g.is_object[:, None], logm, inert, speed, _dot(vel, gh) / V, spin], dim=-1)
