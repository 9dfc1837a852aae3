"""The network of a ``ContactLawGNN`` in numpy, for inference in the hybrid stepper: the same features, normalizers,
MLPs, message passing and bounded corrections as ``ContactLawGNN.law_parameters``, without torch.

Why: a stepped scene holds ~12 contacts, so a torch forward is nearly all per-call dispatch (~100 calls, about 1 ms
per physics step at batch 1), not arithmetic; numpy's calls cost a fraction of that. Training, the twin and every
gradient use the torch model (its PyG message passing); ``tests/test_network_numpy.py`` holds this copy to it.

``numpy_network(model, contacts)`` returns the copy of a model's current weights, remade when any of them changed (an
optimizer step, a loaded state dict), or None where the torch path must run (a model in training mode, whose
normalizers still accumulate, one without a network, or a batch of more than ``MAX_CONTACTS`` contacts). The copy
reads a batch's numpy arrays (``batch_graph.ContactBatch.arrays``) or a ``ContactGraph``.
"""

from __future__ import annotations

import numpy as np
import torch

from . import graph as G
from .law import cross

_F32 = np.float32
# Above this many contacts in a batch the torch model is used: its dispatch is paid once per call, and its matrix
# products on thousands of rows are several times numpy's (measured with `surrogate speed`, docs/stepper-and-envs.md).
MAX_CONTACTS = 256


def _np(t) -> np.ndarray:
    """A numpy view of a tensor (a copy only off the CPU or with gradients)."""
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().numpy() if t.requires_grad or t.device.type != "cpu" else t.numpy()
    return np.asarray(t)


def _dot(a, b):
    """[E, 1] row-wise dot products of [E, 3] a and b."""
    return np.einsum("ij,ij->i", a, b)[:, None]


def _tan(x, n):
    return x - _dot(x, n) * n


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


def _units(a: dict):
    """Per-graph (L [G], V [G], F0 [G]) as ``graph.units``."""
    g = a["gravity"]
    gn = np.maximum(np.sqrt((g * g).sum(-1)), 1e-6)
    return a["length"], np.sqrt(gn * a["length"]), a["mass_ref"] * gn


def _relative_velocity(a: dict):
    s, o = a["edge_index"]
    vel, omega = a["vel"], a["omega"]
    va = vel[o] + cross(omega[o], a["r_obj"])
    vb = vel[s] + cross(omega[s], a["r_oth"])
    return va - vb, omega[o] - omega[s]


def _gravity_dir(a: dict) -> np.ndarray:
    g = a["gravity"]
    return g / np.maximum(np.sqrt((g * g).sum(-1, keepdims=True)), 1e-6)


# ``graph.EDGE_SCALARS`` from the stacked parts of ``edge_features``: [dist, 5 normal components (v, r_obj, r_oth, w,
# g), 5 tangential norms (the same), 3 tangential dots (vt.rt, gt.vt, gt.rt), 3 triple products (rt x vt, gt x vt,
# gt x rt, on n)] reordered, and the powers of L and V that make each nondimensional
_SCALAR_ORDER = np.array([0, 1, 6, 2, 7, 3, 8, 4, 9, 5, 10, 11, 14, 12, 15, 13, 16])
_L_POWER = np.array([-1, 0, 0, -1, -1, -1, -1, 1, 1, 0, 0, -1, -1, 0, 0, -1, -1], dtype=float)
_V_POWER = np.array([0, -1, -1, 0, 0, 0, 0, -1, -1, 0, 0, -1, -1, -1, -1, 0, 0], dtype=float)
_TRIPLE_SIGN = np.array([-1.0, 1.0, 1.0])  # n.(rt x vt) = -n.(vt x rt)


def edge_features(a: dict) -> np.ndarray:
    """[E, 41] ``graph.edge_features`` of the arrays of ``graph_arrays`` (float64), in a few stacked operations
    (each numpy call costs microseconds whatever its size: a contact's 17 scalars one by one would be most of it)."""
    eg = a["batch"][a["edge_index"][1]]
    L, V, _ = _units(a)
    L, V = L[eg, None], V[eg, None]
    n = a["normal"]
    v, w = _relative_velocity(a)
    X = np.stack([v, a["r_obj"], a["r_oth"], w, _gravity_dir(a)[eg]], axis=1)  # [E, 5, 3]
    Xn = (X @ n[:, :, None])[..., 0]  # [E, 5] normal components
    T = X - Xn[..., None] * n[:, None, :]  # tangential parts
    Tn = np.sqrt((T * T).sum(-1) + 1e-12)
    A, B = T[:, [0, 4, 4]], T[:, [1, 0, 1]]  # (vt, rt), (gt, vt), (gt, rt)
    dots = (A * B).sum(-1)
    triples = (cross(A, B) @ n[:, :, None])[..., 0] * _TRIPLE_SIGN
    parts = np.concatenate([a["dist"][:, None], Xn, Tn, dots, triples], axis=1)[:, _SCALAR_ORDER]
    scal = parts * (L ** _L_POWER) * (V ** _V_POWER)
    d = np.concatenate([a["geom_obj"], a["geom_oth"]], axis=1)
    d[:, [8, 9, 10, 11, 20, 21, 22, 23]] /= L  # bounding radius and half-sizes over L
    return np.concatenate([scal, d], axis=-1)


def node_features(a: dict) -> np.ndarray:
    """[N, 9] ``graph.node_features`` of the arrays of ``graph_arrays`` (float64)."""
    nb = a["batch"]
    L, V, _ = _units(a)
    L, V, M = L[nb, None], V[nb, None], a["mass_ref"][nb, None]
    gh = _gravity_dir(a)[nb]
    st, mass = a["static"][:, None], a["mass"][:, None]
    vel, omega = a["vel"], a["omega"]
    with np.errstate(divide="ignore", invalid="ignore"):  # a static node's row is replaced by zeros
        logm = np.where(st > 0, 0.0, np.log(np.maximum(mass, 1e-9) / M))
        inert = np.where(st > 0, 0.0, a["inertia"] / (np.maximum(mass, 1e-9) * L * L))
    speed = np.sqrt(_dot(vel, vel) + 1e-12) / V
    spin = np.sqrt(_dot(omega, omega) + 1e-12) * L / V
    return np.concatenate([st, a["is_object"][:, None], logm, inert, speed, _dot(vel, gh) / V, spin], axis=-1)


def history_features(a: dict, z, age, fn_last) -> np.ndarray:
    """[E, 4] ``graph.history_features`` of the arrays of ``graph_arrays`` and the contacts' state (float64)."""
    eg = a["batch"][a["edge_index"][1]]
    L, V, F0 = (u[eg] for u in _units(a))
    v, _ = _relative_velocity(a)
    vt = _tan(v, a["normal"])
    z = np.asarray(z, dtype=vt.dtype)
    return np.stack([np.sqrt((z * z).sum(-1) + 1e-30) / L, (z * vt).sum(-1) / (L * V),
                     np.clip(np.asarray(age, dtype=vt.dtype) * V / L, 0.0, G.HISTORY_AGE_CLIP),
                     np.asarray(fn_last, dtype=vt.dtype) / F0], axis=-1)


def features(g) -> tuple[np.ndarray, np.ndarray]:
    """(edge [E, 41], node [N, 9]) float32: ``ContactLawGNN.features`` in numpy, of a ``ContactGraph`` or a batch's
    arrays (``graph_arrays``)."""
    a = graph_arrays(g)
    return edge_features(a).astype(_F32), node_features(a).astype(_F32)


def _mlp_weights(seq) -> list:
    """[(kind, arrays)] of a ``layers.mlp``: ("linear", W^T [in, out], b), ("silu",), ("norm", w, b, eps)."""
    out = []
    for m in seq:
        if isinstance(m, torch.nn.Linear):
            out.append(("linear", _np(m.weight).T.copy(), _np(m.bias).copy()))
        elif isinstance(m, torch.nn.SiLU):
            out.append(("silu",))
        elif isinstance(m, torch.nn.LayerNorm):
            out.append(("norm", _np(m.weight).copy(), _np(m.bias).copy(), float(m.eps)))
        else:
            raise TypeError(f"no numpy copy of the layer {type(m).__name__}")
    return out


def _run(layers: list, x: np.ndarray) -> np.ndarray:
    """One ``layers.mlp`` pass in float32 on [*, in] rows."""
    for op in layers:
        if op[0] == "linear":
            x = x @ op[1] + op[2]
        elif op[0] == "silu":
            x = x / (1.0 + np.exp(-x))
        else:
            d = x - x.sum(-1, keepdims=True) / x.shape[-1]  # np.mean's own overhead is most of a small row's cost
            x = d / np.sqrt((d * d).sum(-1, keepdims=True) / x.shape[-1] + op[3]) * op[1] + op[2]
    return x


def _stats(norm) -> tuple[np.ndarray, np.ndarray]:
    mean, std = norm.stats()
    return _np(mean), _np(std)


class NumpyNetwork:
    """A copy of one ``ContactLawGNN``'s network (weights, normalizer statistics, switches) in numpy.

    ``law_parameters(g, features=None, state=None)`` is ``ContactLawGNN.law_parameters`` for a model in eval mode:
    [E, C] float64 (k, c, mu[, k_z][, mu_spin, mu_roll]) in the prior's units; ``g`` a ``ContactGraph`` or a batch's
    arrays (``graph_arrays``), ``state`` a ``history.ContactState`` of numpy arrays (None: fresh contacts)."""

    def __init__(self, model):
        m = model
        self.logs = [_np(m.log_stiffness).copy(), _np(m.log_damping).copy(), _np(m.log_friction).copy()]
        if m.presliding:
            self.logs.append(_np(m.log_presliding).copy())
            self.presliding_on = _np(m.presliding_on)
        if m.spin:
            spin = _np(m.log_spin).copy()
            self.logs += [spin[0], spin[1]]
            self.spin_on, self.spin_column = _np(m.spin_on), m.spin_columns[0]
        self.presliding, self.spin, self.history = bool(m.presliding), bool(m.spin), bool(m.history)
        self.bounds, self.presliding_bound, self.mu_max = m.bounds, m.presliding_bound, m.mu_max
        self.edge_stats, self.node_stats = _stats(m.edge_norm), _stats(m.node_norm)
        self.hist_stats = _stats(m.hist_norm) if self.history else None
        self.config_index = _np(m.config_index)
        self.edge_index_read = None if m.geometry else _np(m.edge_input_index)
        self.stiffness = _mlp_weights(m.stiffness_mlp)
        self.edge_enc, self.node_enc = _mlp_weights(m.edge_enc), _mlp_weights(m.node_enc)
        self.layers = [(_mlp_weights(layer.edge_mlp), None if layer.node_mlp is None else _mlp_weights(layer.node_mlp))
                       for layer in m.layers]
        self.decoder = _mlp_weights(m.decoder)

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
            ef, nf = edge_features(a).astype(_F32), node_features(a).astype(_F32)
        else:
            ef, nf = (np.asarray(_np(f), dtype=_F32) for f in features)
        ef = (ef - self.edge_stats[0]) / self.edge_stats[1]
        nf = (nf - self.node_stats[0]) / self.node_stats[1]
        s_k, s_c, s_mu = (np.float32(s) for s in self.bounds)
        o_k = _run(self.stiffness, ef[:, self.config_index])[:, 0]
        e = ef if self.edge_index_read is None else ef[:, self.edge_index_read]
        if self.history:
            z, age, fn = (np.zeros((len(src), 3)), np.zeros(len(src)), np.zeros(len(src))) if state is None else state[:3]
            h = history_features(a, z, age, fn).astype(_F32)
            e = np.concatenate([e, (h - self.hist_stats[0]) / self.hist_stats[1]], axis=1)
        e = _run(self.edge_enc, e)
        x = _run(self.node_enc, nf)
        n_nodes = len(x)
        for edge_mlp, node_mlp in self.layers:  # layers.InteractionLayer: x_j the sender (row 0), x_i the receiver
            e = e + _run(edge_mlp, np.concatenate([e, x[src], x[dst]], axis=1))
            if node_mlp is not None:
                agg_in = np.zeros((n_nodes, e.shape[1]), _F32)
                agg_out = np.zeros((n_nodes, e.shape[1]), _F32)
                np.add.at(agg_in, dst, e)
                np.add.at(agg_out, src, e)
                x = x + _run(node_mlp, np.concatenate([x, agg_in, agg_out], axis=1))
        o = _run(self.decoder, e)
        corr = [s_k * np.tanh(o_k), s_c * np.tanh(o[:, 0]), s_mu * np.tanh(o[:, 1])]
        if self.history and self.presliding:
            corr.append(np.float32(self.presliding_bound) * np.tanh(o[:, 2]))
        elif self.presliding:
            corr.append(np.zeros_like(o_k))
        if self.spin:
            corr += [s_mu * np.tanh(o[:, -1])] * 2
        out = np.exp(base + np.stack(corr, axis=1).astype(np.float64))
        out[:, 2] = np.minimum(out[:, 2], self.mu_max)
        return self._spring_off(out, group)


def _tensors(model) -> list:
    """Every weight and buffer of ``model`` (walking its modules costs ~0.1 ms: done once per copy)."""
    return [*model.parameters(), *model.buffers()]


def numpy_network(model, contacts: int = 0) -> NumpyNetwork | None:
    """The numpy copy of ``model``'s network (cached on the model, remade when a weight or buffer was written in place:
    an optimizer step, ``load_state_dict``, a normalizer's update), or None where the torch path must run: no network
    (``corrections`` off), training mode (its normalizers still accumulate), or more than ``MAX_CONTACTS`` contacts
    (``contacts``: the batch's), where torch's matrix products are the faster. A weight replaced by a new tensor
    object is not seen: write weights in place (as torch's optimizers and ``load_state_dict`` do)."""
    if contacts > MAX_CONTACTS or not getattr(model, "corrections", False) or model.training \
            or not hasattr(model, "stiffness_mlp"):
        return None
    cached = model.__dict__.get("_numpy_network")
    if cached is not None and [t._version for t in cached[0]] == cached[1]:
        return cached[2]
    tensors = _tensors(model)
    cached = (tensors, [t._version for t in tensors], NumpyNetwork(model))
    model.__dict__["_numpy_network"] = cached
    return cached[2]
