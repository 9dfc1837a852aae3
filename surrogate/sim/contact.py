"""Contact models the hybrid stepper can call, and the input-range check of learned ones.

The interface (``ContactLawGNN`` has it too, and is solved semi-implicitly: ``law_solve``)::

    forces = contact_model(graph)      # graph: batched contact graph (``surrogate.model.batch_graph``)
                                       # forces: [E, 3] N, world axes, on the object at each contact
                                       #         (the other body receives -F at the same point)

plus an optional ``prepare(model, datas)`` that the stepper calls first with the ``MjModel``
and the ``MjData`` list the graph was built from (for models that read MuJoCo's state).

Besides the law, two real contact models live here; the stepper's oracle tests use them:

* ``ZeroContact``: no force at all (the owned pairs are detected and ignored).
* ``MuJoCoContact``: MuJoCo's own analytic contact force of every owned contact, solved on a
  scratch copy of each ``MjData`` with the owned pairs switched to analytic mode (the other
  constraints solved with them, as ``mj_step`` would).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import mujoco
import numpy as np
import torch

from ..model import graph as G
from ..scenes import set_contact_mode


@runtime_checkable
class ContactModel(Protocol):
    """Anything that maps a batched contact graph to per-contact forces.

    ``__call__(graph) -> [E, 3]`` forces (N, world axes) on the object side of each edge;
    a torch tensor (any float dtype) or a numpy array. An optional ``prepare(model, datas)``
    is called before every call.
    """

    def __call__(self, graph) -> torch.Tensor: ...


class ZeroContact:
    """A contact model that never pushes: [E, 3] zeros."""

    def __call__(self, graph) -> torch.Tensor:
        return torch.zeros(graph.edge_index.shape[1], 3, dtype=torch.float64)


class MuJoCoContact:
    """MuJoCo's analytic contact forces of the owned contacts, as a contact model.

    For every environment with owned contacts, the ``MjData`` is copied (``mj_copyData``, so
    the warm start is the same too) into a scratch ``MjData``, the owned pairs of the stepping
    model are switched to analytic mode, ``mj_forward`` solves all constraints together, and
    ``mj_contactForce`` gives each owned contact's force in its contact frame; the model's pair
    margins and gaps are put back exactly as they were. Contact detection is the same in both
    modes (``margin + gap`` is equal), so contact ``i`` of the scratch copy is contact ``i`` of the
    stepped data (checked).

    Only ``condim = 3`` contacts are reproduced exactly: torsional and rolling friction torques
    (``condim`` 4 and 6) are not forces at the contact point and are dropped.

    Args:
      scene: the ``Scene`` whose model is stepped.
    """

    def __init__(self, scene):
        self.scene = scene
        self._m = None
        self._datas: Sequence[mujoco.MjData] = ()
        self._scratch: list[mujoco.MjData] = []
        self._copies_scratch: mujoco.MjData | None = None

    def prepare(self, model: mujoco.MjModel, datas: Sequence[mujoco.MjData]) -> None:
        self._m, self._datas = model, datas

    def __call__(self, graph) -> torch.Tensor:
        m, ds = self._m, self._datas
        if m is None:
            raise RuntimeError("MuJoCoContact needs prepare(model, datas) before it is called (the stepper does this)")
        if hasattr(ds, "views"):  # ``sim.copies.Copies``: all copies in one analytic forward
            return self._copies_forces(ds, graph)
        env = graph.env.numpy()
        cid = graph.contact_id.numpy()
        sign = graph.sign.numpy().astype(np.float64)
        out = np.zeros((len(env), 3))
        if not len(env):
            return torch.from_numpy(out)
        while len(self._scratch) < len(ds):
            self._scratch.append(mujoco.MjData(m))
        ids = self.scene.owned_pair_ids
        saved = m.pair_margin[ids].copy(), m.pair_gap[ids].copy()
        envs = np.unique(env)
        try:
            set_contact_mode(m, self.scene, "analytic")
            for i in envs:
                mujoco.mj_copyData(self._scratch[i], m, ds[i])
                mujoco.mj_forward(m, self._scratch[i])
        finally:
            m.pair_margin[ids], m.pair_gap[ids] = saved
        f6 = np.zeros(6)
        for e in range(len(env)):
            s, c = self._scratch[env[e]], int(cid[e])
            if c >= s.ncon or not np.array_equal(s.contact.geom[c], ds[env[e]].contact.geom[c]):
                raise RuntimeError(f"env {env[e]}: contact {c} differs between analytic and external mode")
            mujoco.mj_contactForce(m, s, c, f6)
            # contact frame rows (normal, t1, t2); the force acts on geom2 along +normal.
            out[e] = sign[e] * (s.contact.frame[c].reshape(3, 3).T @ f6[:3])
        return torch.from_numpy(out)

    def _copies_forces(self, copies, graph) -> torch.Tensor:
        """The same for B copies in one ``MjData``: one scratch copy, every copy's owned pairs analytic, one
        ``mj_forward``; contact ``cid`` of copy ``env`` is at ``copies.views.contact_index(env, cid)``."""
        m, D = copies.model, copies.data
        env, cid = graph.env.numpy(), graph.contact_id.numpy()
        sign = graph.sign.numpy().astype(np.float64)
        out = np.zeros((len(env), 3))
        if not len(env):
            return torch.from_numpy(out)
        s = self._copies_scratch
        if s is None or s.qpos.shape != D.qpos.shape:
            s = self._copies_scratch = mujoco.MjData(m)
        ids = copies.layout.pair.ravel()
        saved = m.pair_margin[ids].copy(), m.pair_gap[ids].copy()
        try:
            copies.set_mode("analytic")
            mujoco.mj_copyData(s, m, D)
            mujoco.mj_forward(m, s)
        finally:
            m.pair_margin[ids], m.pair_gap[ids] = saved
        f6 = np.zeros(6)
        for e, c in enumerate(copies.views.contact_index(env, cid).tolist()):
            if c >= s.ncon or not np.array_equal(s.contact.geom[c], D.contact.geom[c]):
                raise RuntimeError(f"env {env[e]}: contact {c} differs between analytic and external mode")
            mujoco.mj_contactForce(m, s, c, f6)
            out[e] = sign[e] * (s.contact.frame[c].reshape(3, 3).T @ f6[:3])
        return torch.from_numpy(out)


class InputRange:
    """The range of inputs a learned model was trained on, from its normalizer statistics.

    A feature value ``x`` is out of range when ``|x - mean| > k * max(std, std_floor)``, with the
    mean and standard deviation accumulated over the training set (the ``Normalizer`` buffers
    saved in the checkpoint). Features that were constant in training (one-hot geometry types,
    the gravity direction of ground contacts) get the ``std_floor`` band, so a pad contact on
    a model trained only on ground contacts is flagged.

    Args:
      edge_mean, edge_std: [41] per edge feature.  node_mean, node_std: [9] per node feature.
      k: number of standard deviations.  std_floor: the smallest std used (nondimensional).
    """

    def __init__(self, edge_mean, edge_std, node_mean, node_std, *, k: float = 6.0, std_floor: float = 1e-4):
        self.k = float(k)
        self.edge_mean = torch.as_tensor(edge_mean, dtype=torch.float32)
        self.node_mean = torch.as_tensor(node_mean, dtype=torch.float32)
        self.edge_band = self.k * torch.as_tensor(edge_std, dtype=torch.float32).clamp_min(std_floor)
        self.node_band = self.k * torch.as_tensor(node_std, dtype=torch.float32).clamp_min(std_floor)
        # numpy views of the four (their memory: a band widened in place, as ``from_model`` does, is seen by ``check``)
        self._numpy = tuple(t.numpy() for t in (self.edge_mean, self.edge_band, self.node_mean, self.node_band))

    @classmethod
    def from_model(cls, model, *, k: float = 6.0) -> InputRange | None:
        """From a model's normalizers (``layers.Normalizer``, raw statistics); None if it has none or they are empty."""
        en, nn_ = getattr(model, "edge_norm", None), getattr(model, "node_norm", None)
        if en is None or nn_ is None or float(en.count) == 0 or float(nn_.count) == 0:
            return None

        def raw(norm):
            c = norm.count.clamp_min(1.0)
            mean = norm.sum / c
            return mean, torch.sqrt((norm.sumsq / c - mean * mean).clamp_min(0.0))

        em, es = raw(en)
        nm, ns = raw(nn_)
        return cls(em, es, nm, ns, k=k)

    def check(self, graph, edge_feats=None, node_feats=None) -> dict:
        """Out-of-range inputs of one batched graph.

        ``graph``: a ``ContactGraph``, or a batch's arrays (``ContactBatch.arrays``, with the features given).
        ``edge_feats`` [E, 41] / ``node_feats`` [N, 9]: the features the model saw, torch or numpy (computed from
        ``graph`` if not given).

        Returns:
          {"edge": [E] bool, "node": [N] bool (only nodes that take part in a contact),
           "edge_features": [41] int counts, "node_features": [9] int counts}.
        """
        ef = G.edge_features(graph) if edge_feats is None else edge_feats
        nf = G.node_features(graph) if node_feats is None else node_feats
        ef, nf = (f.detach().numpy() if isinstance(f, torch.Tensor) else f for f in (ef, nf))
        if isinstance(graph, dict):
            num_nodes, edge_index = graph["num_nodes"], graph["edge_index"]
        else:
            num_nodes, edge_index = graph.num_nodes, graph.edge_index.numpy()
        em, eband, nm, nband = self._numpy
        eb = np.abs(ef - em) > eband
        used = np.zeros(int(num_nodes), dtype=bool)
        used[np.asarray(edge_index).reshape(-1)] = True
        nb = (np.abs(nf - nm) > nband) & used[:, None]
        return {"edge": eb.any(1), "node": nb.any(1), "edge_features": eb.sum(0), "node_features": nb.sum(0)}
