"""Batched contact graphs straight from many ``MjData`` (one PyG ``Data`` for all environments).

The one contact-graph builder: the hybrid stepper (``surrogate.sim``) and the differentiable twin
build their graphs here. The Python loop is reduced to reading a few arrays per ``MjData``; everything per
contact is vectorized numpy.

The graph is a ``ContactGraph`` (plain attributes; ``to_pyg()`` makes a PyG ``Data``). Every
environment gets the same fixed node set, ``K = 1 + len(others)`` nodes (node 0 the object, then
every body that appears in an owned pair, sorted by body id), so node ``k`` of environment ``i`` is
node ``i * K + k``; a node without edges sends and receives no messages.

Fields (float32 unless noted; E contacts, N = B * K nodes, B environments), as in
``surrogate.model.graph``::

    edge_index [2, E] long (other body node, object node)    normal, r_obj, r_oth, tangent [E, 3]
    dist [E]   geom_obj, geom_oth [E, 12]   vel, omega [N, 3]   mass [N]   inertia [N, 3]
    static, is_object [N]   gravity [B, 3]   length, mass_ref [B]   object_index [B] long
    batch [N] long (environment of each node)
    inertia_w [B, 3, 3]    the object's inertia about its COM in world axes (kg m^2)
    dt [B]                 the physics step (s)
    env [E] long           environment of each contact
    contact_id [E] long    index into that environment's ``data.contact``
    sign [E]               +1 if the object is geom2 of the contact (normal = sign * frame[0])
    body_id [N] long       MuJoCo body id of each node
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import mujoco
import numpy as np
import torch

from ..scenes.scene import match_pair_keys, pair_keys
from .contact_graph import INT_FIELDS, ContactGraph
from .data_views import DataViews
from .graph import GEOM_DESC, geom_descriptor
from .law import cross
from .patch import patch_centres


@dataclass
class ContactBatch:
    """A batched contact set: float64 numpy geometry for the stepper, the network's graph on demand.

    Attributes:
      env: [E] environment of each contact.
      node: [E] global node index of the other body (``env * K + k``).
      r_obj, r_oth: [E, 3] float64 lever arms (m) from the object's / other body's COM, computed on first access
        (from this step's positions, copied at build time: valid after the MjData moved on).
      normal: [E, 3] float64 contact normal pointing into the object.  dist: [E] float64 signed distance (m).
      vel, omega: [B * K, 3] float64 node velocities (m/s, rad/s, world axes; zero for static bodies), computed on
        first access (the law solve takes the contacts' velocities from its Jacobians instead).
      num_envs: B.  K: nodes per environment.
      graph: the ``ContactGraph`` (module docstring), built from these arrays on first access: a model
        without a network (a constant law) is stepped from the arrays alone, without any torch tensor.
      A batch built with ``graph=False`` (``GraphBuilder.build``) has neither ``graph`` nor ``vel`` / ``omega``:
      reading them raises ``ValueError``.
    """

    env: np.ndarray
    node: np.ndarray
    normal: np.ndarray
    dist: np.ndarray
    num_envs: int
    K: int
    _make_graph: object = None  # () -> ContactGraph
    _arrays: object = None  # () -> the graph's fields as numpy, computed once on first use
    _velocities: object = None  # () -> (vel, omega), computed once on first use
    _levers: object = None  # () -> (r_obj, r_oth), computed once on first use
    _frames: object = None  # () -> (rot [E, 3, 3], point [E, 3]), computed once on first use
    # (pos [E, 3], cdof [B, nv, 6], M [B, nM], qvel [B, nv], subtree COM of each dof's root body [B, nv, 3])
    dynamics: tuple | None = None
    contact_set: ContactSet | None = None
    _graph: object = None

    @property
    def graph(self) -> ContactGraph:
        if self._graph is None:
            self._graph = self._make_graph()
        return self._graph

    # computed on first access (the class docstring): [E, 3] lever arms, [B * K, 3] node velocities
    r_obj = property(lambda self: self._levers()[0])
    r_oth = property(lambda self: self._levers()[1])
    vel = property(lambda self: self._velocities()[0])
    omega = property(lambda self: self._velocities()[1])
    # (rot [E, 3, 3] the other body's inertial frame (world = rot @ local), point [E, 3] the contact point in it, m):
    # what identifies a contact across steps (``model.history``); read from the batch's views when first used
    frames = property(lambda self: self._frames())
    # the graph's fields as numpy arrays (float64; the module docstring's names): read without building the graph
    arrays = property(lambda self: self._arrays())

    @property
    def num_contacts(self) -> int:
        return len(self.env)


@dataclass
class ContactSet:
    """What follows from which geom pairs touch in which environment, not from where (``GraphBuilder.contact_set``):
    kept while it stays the same, as for a held object over many steps, so that a step re-derives none of it.

    Attributes (E owned contacts, B environments): rows (the owned rows of all contacts: an index array, or
    ``slice(None)`` when all are owned), env, cid (index into ``data.contact``), local (the other body's node,
    0..K-1), node (``env * K + local``) [E] int64; sign [E] (+1: the object is geom2), g_obj, g_oth [E] geom ids;
    oth_static [E, 1] bool (the other body is static); counts [B] contacts per environment, start [B] the
    first row of each; ``solve``: tables ``sim.law_solve`` derives from the set, cached with it.
    """

    rows: object
    env: np.ndarray
    cid: np.ndarray
    sign: np.ndarray
    g_obj: np.ndarray
    g_oth: np.ndarray
    local: np.ndarray
    node: np.ndarray
    counts: np.ndarray
    start: np.ndarray
    oth_static: np.ndarray | None = None
    solve: dict = field(default_factory=dict)


def _dof_chain(model: mujoco.MjModel, body: int) -> np.ndarray:
    """[nv] bool: the dofs whose motion moves ``body`` (its own and its ancestors', MuJoCo's ``mj_jac`` chain)."""
    out = np.zeros(model.nv, dtype=bool)
    b = body
    while b > 0 and model.body_dofnum[b] == 0:
        b = int(model.body_parentid[b])
    if b > 0:
        j = int(model.body_dofadr[b] + model.body_dofnum[b] - 1)
        while j >= 0:
            out[j] = True
            j = int(model.dof_parentid[j])
    return out


def _dof_rotates(model: mujoco.MjModel) -> np.ndarray:
    """[nv] bool: the dofs whose motion turns their body (hinge, ball, a free joint's last three); a sliding
    dof's ``cdof`` has no angular part, so its point velocity is the same everywhere on the body."""
    jtype, first = model.jnt_type[model.dof_jntid], model.jnt_dofadr[model.dof_jntid]
    J = mujoco.mjtJoint
    return (jtype == J.mjJNT_HINGE) | (jtype == J.mjJNT_BALL) | ((jtype == J.mjJNT_FREE) & (np.arange(model.nv) - first >= 3))


def _dense_M_index(model: mujoco.MjModel) -> np.ndarray:
    """[nv, nv] index of each entry of the dense joint-space inertia in ``MjData.M`` (-1: structurally zero),
    found through MuJoCo's own ``mj_fullM`` (so it follows MuJoCo's sparse layout, whatever it is)."""
    d = mujoco.MjData(model)
    d.M[:] = np.arange(1, len(d.M) + 1)
    dense = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, d, dense)
    return dense.astype(np.int64) - 1


def _once(f):
    """``f()`` computed on the first call and kept (``functools.cache`` without its wrapper's cost: 3 per step)."""
    box = []
    return lambda: box[0] if box else (box.append(f()) or box[0])


class GraphBuilder:
    """Precomputed per-model tables and the batched builder for one scene.

    Args:
      model: the compiled model (any contact mode; only sizes, body and geom tables are read,
        and they do not change with the mode).
      object_body: body id of the object.
      length: m, object size L.
      owned_pair_ids: [P] model pair ids owned by the contact model; or ``owned_pair_keys``: their sorted
        geom-pair keys (``scenes.scene.pair_keys``), as ``Scene._keys`` holds them.
    """

    def __init__(self, model: mujoco.MjModel, *, object_body: int, length: float, owned_pair_ids: Sequence[int] | None = None,
                 owned_pair_keys: Sequence[int] | None = None):
        if owned_pair_keys is None:
            keys = pair_keys(model, np.asarray(owned_pair_ids, dtype=int))
        else:
            keys = np.asarray(owned_pair_keys, dtype=np.int64)
        self.ngeom = int(model.ngeom)
        self.nbody = int(model.nbody)
        self.keys = np.sort(keys)
        g1, g2 = self.keys // self.ngeom, self.keys % self.ngeom
        self.object_body = int(object_body)
        self.length = float(length)
        bodies = set(model.geom_bodyid[g1].tolist()) | set(model.geom_bodyid[g2].tolist())
        bodies.discard(self.object_body)
        self.node_body = np.array([self.object_body] + sorted(bodies), dtype=np.int64)
        self.K = len(self.node_body)
        self.node_of = np.full(model.nbody, -1, dtype=np.int64)
        self.node_of[self.node_body] = np.arange(self.K)
        self.geom_body = np.asarray(model.geom_bodyid, dtype=np.int64)
        self.geom_desc = np.stack([geom_descriptor(model, g) for g in range(model.ngeom)]) if model.ngeom else np.zeros((0, len(GEOM_DESC)))
        nb = self.node_body
        self.static = (model.body_weldid[nb] == 0).astype(np.float64)
        self.mass = np.where(self.static > 0, 0.0, model.body_mass[nb])
        self.inertia = np.where(self.static[:, None] > 0, 0.0, np.sort(model.body_inertia[nb], axis=1))
        self.root = np.asarray(model.body_rootid[nb], dtype=np.int64)
        self.dynamic_nodes = np.flatnonzero(self.static == 0)
        self.nv = int(model.nv)
        # per node: the dofs that move its body (law_solve.contact_jacobians), and per dof the root body whose
        # subtree COM its motion dof ``cdof`` is expressed about (every dof of a chain has its body's root)
        self.dof_chain = np.stack([_dof_chain(model, int(b)) for b in nb])  # [K, nv] bool
        self.dof_root = np.asarray(model.body_rootid[model.dof_bodyid], dtype=np.int64)  # [nv]
        self.dof_rotates = _dof_rotates(model)  # [nv] bool
        # [K, nv] each dof's sign in the relative velocity (object point minus other body's point) of a contact with
        # node k: +1 on the object's chain, -1 on a moving other body's, 0 neither (the law solve's Jacobians)
        moving = (self.static == 0) & (np.arange(self.K) > 0)
        self.dof_sign = self.dof_chain[0].astype(np.float64) - self.dof_chain * moving[:, None]
        self._model = model  # for ``M_take``, built on first use (only the law solve needs it)
        self._moving_node = (self.static == 0)[None, :, None]
        self._set = None  # (key, ContactSet) of the last contact set seen (``contact_set``)
        self._tables = {}  # the node tables of each batch size and model (``_node_tables``)

    @functools.cached_property
    def M_take(self) -> tuple[np.ndarray, np.ndarray]:
        """([nv, nv] index into ``MjData.M``, [nv, nv] bool structurally nonzero): the dense inertia is
        ``np.where(nonzero, M[..., take], 0)`` (``_dense_M_index``; it allocates an ``MjData``, so only builders of
        a law solve pay for it)."""
        index = _dense_M_index(self._model)
        return np.maximum(index, 0), index >= 0

    def on_object_body(self, bodies: np.ndarray) -> np.ndarray:
        """[n] bool: which of ``bodies`` belong to the object (one body here; every link of an articulated one in
        ``sim.link_graph.LinkGraphBuilder``)."""
        return bodies == self.object_body

    def contact_set(self, ncon: np.ndarray, geom: np.ndarray) -> ContactSet:
        """The ``ContactSet`` of a batch whose environments have ``ncon`` [B] contacts with geoms ``geom`` [C, 2]
        (all of them, in order); the last one is kept and reused while the same pairs are in contact."""
        key = (ncon.tobytes(), geom.tobytes())
        if self._set is not None and self._set[0] == key:
            return self._set[1]
        B, C = len(ncon), int(ncon.sum())
        geom = geom.astype(np.int64, copy=False)
        env = np.repeat(np.arange(B, dtype=np.int64), ncon)
        cid = np.arange(C, dtype=np.int64) - np.repeat(np.cumsum(ncon) - ncon, ncon)
        # Owned contacts: the unordered geom-pair key must be one of the owned pairs'.
        owned, _ = match_pair_keys(geom, self.ngeom, self.keys)
        rows = slice(None) if owned.all() else np.flatnonzero(owned)
        env, cid, geom = env[rows], cid[rows], geom[rows]
        b2_is_obj = self.on_object_body(self.geom_body[geom[:, 1]])
        g_oth = np.where(b2_is_obj, geom[:, 0], geom[:, 1])
        local = self.node_of[self.geom_body[g_oth]]
        counts = np.bincount(env, minlength=B)
        cs = ContactSet(rows=rows, env=env, cid=cid, sign=np.where(b2_is_obj, 1.0, -1.0),
                        g_obj=np.where(b2_is_obj, geom[:, 1], geom[:, 0]), g_oth=g_oth, local=local,
                        node=env * self.K + local, counts=counts, start=np.cumsum(counts) - counts,
                        oth_static=self.static[local][:, None] > 0)
        self._set = (key, cs)
        return cs

    @classmethod
    def from_scene(cls, scene, model: mujoco.MjModel | None = None) -> GraphBuilder:
        m = scene.model if model is None else model
        return cls(m, object_body=scene.object_body_id, length=scene.obj.size, owned_pair_ids=scene.owned_pair_ids)

    def gather(self, datas: Sequence[mujoco.MjData], *, dynamics: bool = False, views: DataViews | None = None,
               graph: bool = True):
        """Read what the graph needs from every ``MjData`` (after collision detection).

        ``views``: the batch's ``DataViews`` (the stepper keeps one per batch), else they are made here; or the
        ``sim.copies.CopiesViews`` of B copies in one ``MjData`` (then ``datas`` is not read).
        ``graph``: also read what only the graph and the node velocities need (cvel, ximat; else None).
        Returns:
          (contacts, bodies, dyn): contacts = (ncon [B], geom [C, 2] int32, pos [C, 3], frame [C, 9], dist [C]) over
          *all* contacts of all environments; bodies = (xipos [B, K, 3], cvel [B, K, 6], subtree_com of each
          node's root [B, K, 3], the object's inertia frame ximat [B, 3, 3]); with ``dynamics`` dyn = (cdof
          [B, nv, 6], the sparse inertia M [B, nM], qvel [B, nv], subtree_com of each dof's root [B, nv, 3]) for
          the law solve, else None.
        """
        if views is None:
            views = DataViews(datas)
        B = views.num_envs
        # The only per-environment Python: ``d.ncon``; the contact views are made when an environment's count
        # changes (``DataViews.contacts``) and copied once into stacked arrays by numpy.
        ncon, geom, dpf = views.stacked_contacts()
        dist, pos, frame = dpf[:, 0], dpf[:, 1:4], dpf[:, 4:]
        # Whole (small) body tables, from the batch's views: one stacked copy each; node rows picked once for all.
        xipos = views.stack("xipos").reshape(B, self.nbody, 3)
        scom = views.stack("subtree_com").reshape(B, self.nbody, 3)
        if graph:
            cvel = views.stack("cvel").reshape(B, self.nbody, 6)[:, self.node_body]
            ximat = views.stack("ximat").reshape(B, self.nbody, 9)[:, self.object_body].reshape(B, 3, 3)
        else:
            cvel = ximat = None
        dyn = (views.stack("cdof").reshape(B, self.nv, 6), views.stack("M").reshape(B, -1),
               views.stack("qvel").reshape(B, self.nv), scom[:, self.dof_root]) if dynamics else None
        xipos, rcom = xipos[:, self.node_body], scom[:, self.root]
        return (ncon, geom, pos, frame, dist), (xipos, cvel, rcom, ximat), dyn

    def _node_tables(self, model: mujoco.MjModel, B: int) -> dict:
        """The graph's fields that depend only on the scene and the batch size B (masses, inertias, which node is
        static or the object, gravity, sizes, indices): made once per B and model (a step reuses them, unchanged)."""
        key = (B, id(model), model.opt.timestep, tuple(model.opt.gravity), float(model.body_mass[self.object_body]))
        tables = self._tables
        if key not in tables:
            if len(tables) >= 8:  # models whose masses are randomized per rollout: keep a few, not one per draw
                tables.clear()
            K = self.K
            tables[key] = dict(
                num_nodes=B * K, mass=np.tile(self.mass, B), inertia=np.tile(self.inertia, (B, 1)),
                static=np.tile(self.static, B), is_object=np.tile(np.arange(K) == 0, B).astype(np.float64),
                gravity=np.repeat(np.asarray(model.opt.gravity, dtype=np.float64)[None], B, axis=0),
                length=np.full(B, self.length), mass_ref=np.full(B, model.body_mass[self.object_body]),
                object_index=np.arange(B, dtype=np.int64) * K, batch=np.repeat(np.arange(B, dtype=np.int64), K),
                dt=np.full(B, model.opt.timestep), body_id=np.tile(self.node_body, B))
            for a in tables[key].values():
                if isinstance(a, np.ndarray):
                    a.flags.writeable = False  # shared by every step's batch: nobody writes into them
        return tables[key]

    def build(self, model: mujoco.MjModel, datas: Sequence[mujoco.MjData], *, dtype=torch.float32,
              dynamics: bool = False, views: DataViews | None = None, graph: bool = True,
              patch: tuple | None = None) -> ContactBatch:
        """The batched contacts of all ``datas`` (see the module docstring for the graph's fields).

        ``dtype``: of the graph's float fields (float64 for the law models' semi-implicit solve and the twin).
        ``dynamics``: also read what the law solve needs (``ContactBatch.dynamics``).
        ``views``: the batch's ``DataViews`` (made here when not given).
        ``graph``: False skips the arrays only the graph and the node velocities need (the stepper's constant law
        reads neither); the batch's ``graph``, ``vel`` and ``omega`` then raise ``ValueError``.
        ``patch``: ``(on [2] bool, p)`` of a law whose contacts act as patches (``ContactLawGNN.patch``): the points of
        each object body-other body pair in a group ``on`` (surface, body) at their centre (``patch_centres``).
        """
        views = DataViews(datas) if views is None else views  # kept for ``frames``
        (ncon, geom, pos, frame, dist), (xipos, cvel, rcom, ximat), solve_arrays = self.gather(
            datas, dynamics=dynamics, views=views, graph=graph)
        B, K = len(ncon), self.K
        cs = self.contact_set(ncon, geom)
        env, cid, sign, g_obj, g_oth, node = cs.env, cs.cid, cs.sign, cs.g_obj, cs.g_oth, cs.local
        if not isinstance(cs.rows, slice):
            pos, frame, dist = pos[cs.rows], frame[cs.rows], dist[cs.rows]
        normal = sign[:, None] * frame[:, 0:3]
        at = pos  # where MuJoCo found each contact: its identity across steps (``frames``)
        if patch is not None:
            on = np.asarray(patch[0])[(self.static[cs.local] < 0.5).astype(np.int64)]
            pos = patch_centres(pos, -dist, cs.node * self.nbody + self.geom_body[g_obj], on, patch[1])

        @_once
        def levers() -> tuple[np.ndarray, np.ndarray]:
            return pos - xipos[env, 0], np.where(cs.oth_static, 0.0, pos - xipos[env, node])

        @_once
        def frames() -> tuple[np.ndarray, np.ndarray]:
            # read now: valid while the MjData have not stepped on (the stepper and the twin use it before mj_step2)
            rot = views.stack("ximat").reshape(B, self.nbody, 9)[env, self.node_body[node]].reshape(-1, 3, 3)
            return rot, np.einsum("eji,ej->ei", rot, at - xipos[env, node])

        @_once
        def velocities() -> tuple[np.ndarray, np.ndarray]:
            if not graph:
                raise ValueError("this ContactBatch was built with graph=False: it has no node velocities or graph")
            # Node velocities at the COM, world axes (what mj_objectVelocity(..., flg_local=0) returns):
            # cvel is the spatial velocity about the subtree COM of the body's root.
            w = cvel[..., :3]
            v = cvel[..., 3:] + cross(w, xipos - rcom)
            dyn = self._moving_node
            return np.where(dyn, v, 0.0).reshape(B * K, 3), np.where(dyn, w, 0.0).reshape(B * K, 3)

        @_once
        def arrays() -> dict:
            """The graph's fields as numpy arrays (float64 where the graph's are float): what ``make_graph`` turns
            into tensors, and what the stepper's numpy copy of a network reads (``model.network_numpy``)."""
            v, w = velocities()  # first: raises for a batch built with graph=False
            r_obj, r_oth = levers()
            E = len(env)
            return dict(
                self._node_tables(model, B),
                edge_index=np.stack([env * K + node, env * K]) if E else np.zeros((2, 0), dtype=np.int64),
                normal=normal, dist=dist, r_obj=r_obj, r_oth=r_oth, tangent=frame[:, 3:6],
                geom_obj=self.geom_desc[g_obj], geom_oth=self.geom_desc[g_oth], vel=v, omega=w,
                inertia_w=np.einsum("bij,j,bkj->bik", ximat, model.body_inertia[self.object_body], ximat),
                env=env, contact_id=cid, sign=sign,
            )

        def make_graph() -> ContactGraph:
            npd = np.float32 if dtype == torch.float32 else np.float64
            out = {}
            for k, a in arrays().items():
                if k == "num_nodes":
                    out[k] = a
                else:
                    a = np.ascontiguousarray(a, dtype=None if k in INT_FIELDS else npd)
                    # a shared node table (read-only) is copied: a tensor may be written, the table never
                    out[k] = torch.from_numpy(a if a.flags.writeable else a.copy())
            return ContactGraph(**out)

        return ContactBatch(env=env, node=cs.node, normal=normal, dist=dist, num_envs=B, K=K, _make_graph=make_graph,
                            _arrays=arrays,
                            _velocities=velocities, _levers=levers, _frames=frames, contact_set=cs,
                            dynamics=None if solve_arrays is None else (pos, *solve_arrays))
