"""The network of a ``ContactLawGNN`` without torch, for inference in the hybrid stepper: the same features,
normalizers, MLPs, message passing and bounded corrections as ``ContactLawGNN.law_parameters``, on numpy arrays, the
features and the encode-process-decode pass compiled (``network_kernel``).

Why: a stepped scene holds ~12 contacts, so a torch forward is nearly all per-call dispatch (~100 calls, about 1 ms
per physics step at batch 1), not arithmetic; the compiled pass costs ~40 us there, and at a batch of 256 (3,072
contacts) 2.5 ms against torch's 3.8-5.1 ms, its features a fifth of torch's (docs/stepper-and-envs.md). Training,
the twin and every gradient use the torch model (its PyG message passing); ``tests/test_network_numpy.py`` holds
this copy to it.

``numpy_network(model)`` returns the copy of a model's current weights, remade when any of them changed (an optimizer
step, a loaded state dict), or None where the torch path must run (a model in training mode, whose normalizers still
accumulate, or one without a network). The copy reads a batch's numpy arrays (``batch_graph.ContactBatch.arrays``) or
a ``ContactGraph``.
"""

from __future__ import annotations

import numpy as np
import torch

from . import graph as G
from . import network_kernel as K

_F32 = np.float32


def _np(t) -> np.ndarray:
    """A numpy view of a tensor (a copy only off the CPU or with gradients)."""
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().numpy() if t.requires_grad or t.device.type != "cpu" else t.numpy()
    return np.asarray(t)


def graph_arrays(g) -> dict:
    """The fields the features read, as numpy: ``g`` is a batch's arrays already (``ContactBatch.arrays``, what the
    stepper passes), or a ``ContactGraph`` (zero-copy views of its CPU tensors)."""
    if isinstance(g, dict):
        return g
    keys = ("edge_index", "normal", "dist", "r_obj", "r_oth", "geom_obj", "geom_oth", "vel", "omega", "mass",
            "inertia", "static", "is_object", "gravity", "length", "mass_ref")
    out = {k: _np(getattr(g, k)) for k in keys}
    batch = getattr(g, "batch", None)
    out["batch"] = np.zeros(int(g.num_nodes), dtype=np.int64) if batch is None else _np(batch)
    out["num_nodes"] = int(g.num_nodes)
    return out


def edge_features(a: dict) -> np.ndarray:
    """[E, 41] float32 ``graph.edge_features`` of the arrays of ``graph_arrays`` (compiled: ``network_kernel``)."""
    out = np.empty((len(a["dist"]), K.N_EDGE), _F32)
    K.edge_features(*_c(a, "edge_index", "batch", "normal", "dist", "r_obj", "r_oth", "geom_obj", "geom_oth", "vel",
                        "omega", "gravity", "length"), out)
    return out


def node_features(a: dict) -> np.ndarray:
    """[N, 9] float32 ``graph.node_features`` of the arrays of ``graph_arrays`` (compiled: ``network_kernel``)."""
    out = np.empty((len(a["vel"]), K.N_NODE), _F32)
    K.node_features(*_c(a, "batch", "vel", "omega", "mass", "inertia", "static", "is_object", "gravity", "length",
                        "mass_ref"), out)
    return out


def _c(a: dict, *keys) -> list:
    """The arrays ``keys`` of ``a`` as the kernels take them: C-contiguous, float64 (indices int64)."""
    return [np.ascontiguousarray(a[k], dtype=np.int64 if k in ("edge_index", "batch") else np.float64) for k in keys]


def history_features(a: dict, z, age, fn_last) -> np.ndarray:
    """[E, 4] float32 ``graph.history_features`` of the arrays of ``graph_arrays`` and the contacts' state (compiled:
    ``network_kernel``)."""
    out = np.empty((len(a["dist"]), 4), _F32)
    K.history_features(*_c(a, "edge_index", "batch", "normal", "r_obj", "r_oth", "vel", "omega", "gravity", "length",
                           "mass_ref"), *(np.ascontiguousarray(x, dtype=np.float64) for x in (z, age, fn_last)),
                       float(G.HISTORY_AGE_CLIP), out)
    return out


def features(g) -> tuple[np.ndarray, np.ndarray]:
    """(edge [E, 41], node [N, 9]) float32: ``ContactLawGNN.features`` in numpy, of a ``ContactGraph`` or a batch's
    arrays (``graph_arrays``)."""
    a = graph_arrays(g)
    return edge_features(a), node_features(a)


def _mlp(seq) -> tuple:
    """``([(W [out, in], b)], LayerNorm (weight, bias, eps) or None)`` of a ``layers.mlp`` (Linear layers with SiLU
    between them, a LayerNorm or not on the output): what ``network_kernel.pack_mlps`` packs."""
    kinds = "".join("L" if isinstance(m, torch.nn.Linear) else "S" if isinstance(m, torch.nn.SiLU) else
                    "N" if isinstance(m, torch.nn.LayerNorm) else "?" for m in seq)
    linears = [m for m in seq if isinstance(m, torch.nn.Linear)]
    if kinds.removesuffix("N") != "LS" * (len(linears) - 1) + "L":
        raise TypeError(f"no compiled copy of an MLP of layers {[type(m).__name__ for m in seq]}")
    norm = seq[-1] if kinds.endswith("N") else None
    return ([(_np(m.weight), _np(m.bias)) for m in linears],
            None if norm is None else (_np(norm.weight), _np(norm.bias), float(norm.eps)))


def _stats(norm) -> tuple[np.ndarray, np.ndarray]:
    mean, std = norm.stats()
    return _np(mean), _np(std)


class NumpyNetwork:
    """A copy of one ``ContactLawGNN``'s network (weights, normalizer statistics, switches) in numpy; of an
    ensemble's, each member's (``extra``), their log-corrections averaged as the torch model does.

    ``law_parameters(g, features=None, state=None)`` is ``ContactLawGNN.law_parameters`` for a model in eval mode:
    [E, C] float64 (k, c, mu[, k_z][, mu_spin, mu_roll]) in the prior's units; ``g`` a ``ContactGraph`` or a batch's
    arrays (``graph_arrays``), ``state`` a ``history.ContactState`` of numpy arrays (None: fresh contacts)."""

    def __init__(self, model):
        m = model
        self.logs = [_np(m.log_stiffness).copy(), _np(m.log_damping).copy(), _np(m.log_friction).copy()]
        if m.presliding:
            self.logs.append(_np(m.log_presliding).copy())
            self.presliding_on = _np(m.presliding_on).copy()
        if m.spin:
            spin = _np(m.log_spin).copy()
            self.logs += [spin[0], spin[1]]
            self.spin_on, self.spin_column = _np(m.spin_on).copy(), m.spin_columns[0]
        self.presliding, self.spin, self.history = bool(m.presliding), bool(m.spin), bool(m.history)
        self.bounds, self.presliding_bound, self.mu_max = m.bounds, m.presliding_bound, m.mu_max
        self.edge_stats, self.node_stats = np.stack(_stats(m.edge_norm)), np.stack(_stats(m.node_norm))
        self.hist_stats = np.stack(_stats(m.hist_norm)) if self.history else np.zeros((2, 0), _F32)
        self.config_index = _np(m.config_index).astype(np.int64)
        mlps = [m.stiffness_mlp, m.edge_enc, m.node_enc, m.decoder]
        for layer in m.layers:
            mlps += [layer.edge_mlp, layer.node_mlp]
        packed, roles = [], []  # the kernel's roles: stiffness, edge and node encoders, decoder, then each step's two
        for q in mlps:
            roles.append(-1 if q is None else len(packed))
            packed += [] if q is None else [_mlp(q)]
        self.weights, self.roles = K.pack_mlps(packed), np.array(roles, dtype=np.int64)
        self.extra = [NumpyNetwork(e) for e in m.extra]  # an ensemble's other members (their laws unused)

    def _spring_off(self, out: np.ndarray, group: np.ndarray) -> np.ndarray:
        if self.presliding:
            out[:, 3] = np.where(self.presliding_on[group], out[:, 3], 0.0)
        if self.spin:
            j = self.spin_column
            out[:, j:] = np.where(self.spin_on[:, group].T, out[:, j:], 0.0)
        return out

    def law_parameters(self, g, *, features=None, state=None) -> np.ndarray:
        a = graph_arrays(g)
        src, dst = a["edge_index"]
        group = (a["static"][src] < 0.5).astype(np.int64)
        base = np.stack([log[group] for log in self.logs], axis=1).astype(np.float64)
        if features is None:
            ef, nf = edge_features(a), node_features(a)
        else:
            ef, nf = (np.ascontiguousarray(_np(f), dtype=_F32) for f in features)
        hist = np.zeros((len(src), 0), _F32)
        if self.history:
            z, age, fn = (np.zeros((len(src), 3)), np.zeros(len(src)), np.zeros(len(src))) if state is None else state[:3]
            hist = history_features(a, z, age, fn)
        corrs = [m.log_corrections(a, ef, nf, hist) for m in (self, *self.extra)]
        corr = corrs[0] if len(corrs) == 1 else np.mean(corrs, axis=0)  # one network: no copy in the stepper's loop
        out = np.exp(base + corr)
        out[:, 2] = np.minimum(out[:, 2], self.mu_max)
        return self._spring_off(out, group)

    def log_corrections(self, a: dict, ef, nf, hist) -> np.ndarray:
        """[E, C] float64 bounded log-corrections of this network alone (``ContactLawGNN.log_corrections``)."""
        s_k, s_c, s_mu = (np.float32(s) for s in self.bounds)
        o_k, o = K.network(ef, nf, hist, np.ascontiguousarray(a["edge_index"], dtype=np.int64), self.edge_stats,
                           self.node_stats, self.hist_stats, self.config_index, self.roles,
                           *self.weights)
        corr = [s_k * np.tanh(o_k), s_c * np.tanh(o[:, 0]), s_mu * np.tanh(o[:, 1])]
        if self.history and self.presliding:
            corr.append(np.float32(self.presliding_bound) * np.tanh(o[:, 2]))
        elif self.presliding:
            corr.append(np.zeros_like(o_k))
        if self.spin:
            corr += [s_mu * np.tanh(o[:, -1])] * 2
        return np.stack(corr, axis=1).astype(np.float64)


def _tensors(model) -> list:
    """Every weight and buffer of ``model`` (walking its modules costs ~0.1 ms: done once per copy)."""
    return [*model.parameters(), *model.buffers()]


def numpy_network(model) -> NumpyNetwork | None:
    """The numpy copy of ``model``'s network (cached on the model, remade when a weight or buffer was written in place:
    an optimizer step, ``load_state_dict``, a normalizer's update), or None where the torch path must run: no network
    (``corrections`` off) or training mode (its normalizers still accumulate). A weight replaced by a new tensor
    object is not seen: write weights in place (as torch's optimizers and ``load_state_dict`` do)."""
    if not getattr(model, "corrections", False) or model.training or not hasattr(model, "stiffness_mlp"):
        return None
    cached = model.__dict__.get("_numpy_network")
    if cached is not None and [t._version for t in cached[0]] == cached[1]:
        return cached[2]
    tensors = _tensors(model)
    cached = (tensors, [t._version for t in tensors], NumpyNetwork(model))
    model.__dict__["_numpy_network"] = cached
    return cached[2]
