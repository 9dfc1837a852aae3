"""Encode-process-decode graph network for contact forces (Battaglia et al. 2018; GNS).

    edge feats [E, 41] --norm--> MLP --> e [E, H]      node feats [N, 9] --norm--> MLP --> h [N, H]
    M x InteractionLayer:  e <- e + MLP_e([e, h_src, h_dst])          (edge update, kept)
                           h <- h + MLP_n([h, sum_in e, sum_out e])   (node update; not in the last
                                                                      step, whose nodes no output reads)
    decoder MLP_d(e) -> 6 raw outputs per contact -> structured force:

      f_n = F0 softplus(o0)                          >= 0, along the normal n (into the object)
      mu  = mu_max sigmoid(o5)                        learned per-contact friction coefficient
      u   = o1 b1 + o2 (n x b1) + o3 e1 + o4 e2,      b1 = -v_t / sqrt(|v_t|^2 + (eps V)^2)
      F_t = mu f_n u / sqrt(1 + |u|^2)                |F_t| < mu f_n: inside the friction cone
      F   = f_n n + F_t   (world axes; on the object, -F on the other body)

b1 opposes slip (Coulomb direction), (e1, e2) is the reported contact frame so sticking
friction can point anywhere; every term is built from invariant features times vectors that
rotate with the scene, so forces are rotation-equivariant and contact-frame forces invariant.
Per-body wrenches sum F and r x F about each body's COM (equal and opposite on the two sides).

The learned core sees only normalized nondimensional features: running mean/std buffers
(``Normalizer``) accumulate during the first ``max_accumulations`` training batches and are
part of the state dict (so of the checkpoint).
"""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric.nn import MessagePassing

from . import graph as G


class Normalizer(nn.Module):
    """Running per-feature mean/std (buffers), accumulated in training mode until ``max_accumulations``."""

    def __init__(self, size: int, *, max_accumulations: int = 200, std_eps: float = 1e-6):
        super().__init__()
        self.max_accumulations = max_accumulations
        self.std_eps = std_eps
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("sum", torch.zeros(size, dtype=torch.float64))
        self.register_buffer("sumsq", torch.zeros(size, dtype=torch.float64))
        self.register_buffer("accumulations", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def accumulate(self, x: torch.Tensor) -> None:
        if x.shape[0] == 0:
            return
        xd = x.detach().to(torch.float64)
        self.count += xd.shape[0]
        self.sum += xd.sum(0)
        self.sumsq += (xd * xd).sum(0)
        self.accumulations += 1

    def stats(self):
        c = self.count.clamp_min(1.0)
        mean = self.sum / c
        std = torch.sqrt((self.sumsq / c - mean * mean).clamp_min(0.0))
        std = torch.where(self.count > 0, std, torch.ones_like(std)).clamp_min(self.std_eps)
        # constant features (one-hots that never change) pass through centred, unscaled
        std = torch.where(std < 1e-4, torch.ones_like(std), std)
        return mean.float(), std.float()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and self.accumulations < self.max_accumulations:
            self.accumulate(x)
        mean, std = self.stats()
        return (x - mean) / std


def mlp(n_in: int, hidden: int, n_out: int, layers: int = 2, *, layer_norm: bool = True) -> nn.Sequential:
    mods, d = [], n_in
    for _ in range(layers - 1):
        mods += [nn.Linear(d, hidden), nn.SiLU()]
        d = hidden
    mods.append(nn.Linear(d, n_out))
    if layer_norm:
        mods.append(nn.LayerNorm(n_out))
    return nn.Sequential(*mods)


class InteractionLayer(MessagePassing):
    """One message-passing step that keeps both updates (residual).

    ``edge_updater`` computes the new edge latents explicitly (PyG's ``update()`` only sees
    aggregated node messages and would drop an edge update computed inside ``message()``);
    ``propagate`` then sums them at the receiving and (on the flipped index) sending nodes.

    Shapes: x [N, H], edge_index [2, E], e [E, H] -> (x' [N, H], e' [E, H]).
    """

    def __init__(self, hidden: int, layers: int = 2, *, update_nodes: bool = True):
        super().__init__(aggr="sum")
        self.edge_mlp = mlp(3 * hidden, hidden, hidden, layers)
        # the last layer's node update could not reach the per-contact decoder: it is not built
        self.node_mlp = mlp(3 * hidden, hidden, hidden, layers) if update_nodes else None

    def edge_update(self, x_i, x_j, e):
        return self.edge_mlp(torch.cat([e, x_j, x_i], dim=-1))

    def message(self, m):
        return m

    def forward(self, x, edge_index, e):
        e_new = e + self.edge_updater(edge_index, x=x, e=e)
        if self.node_mlp is None:
            return x, e_new
        agg_in = self.propagate(edge_index, m=e_new, size=(x.shape[0], x.shape[0]))
        agg_out = self.propagate(edge_index.flip(0), m=e_new, size=(x.shape[0], x.shape[0]))
        x_new = x + self.node_mlp(torch.cat([x, agg_in, agg_out], dim=-1))
        return x_new, e_new


class ContactGNN(nn.Module):
    """Per-contact forces from a contact graph (``surrogate.model.graph``).

    Args:
      hidden: latent width H.  steps: message-passing steps M.  mlp_layers: linear layers per MLP.
      mu_max: upper bound of the learned friction coefficient.  slip_eps: eps of the slip direction (in V).
      gate_distance, gate_width: if set (in L), the normal force is multiplied by
        sigmoid(-(d/L - gate_distance) / gate_width): no push across a gap. Without it a
        model trained on noisy poses can hold an object hovering millimetres above a
        surface (the learned force need not vanish at positive distance).
      dissipative: tangential force only against the slip, F_t = mu f_n sigmoid(o1) b1 with
        b1 = -v_t / sqrt(|v_t|^2 + eps^2), so F_t . v_t <= 0: friction can never push an
        object along (the free tangential components of the default can, which injects
        energy on shapes the model has not seen).
      barrier_depth, barrier_stiffness: if set, a fixed penetration barrier is added to the
        normal force beyond ``barrier_depth`` (in L): f_n += F0 * barrier_stiffness * (p/L - depth)
        for penetration p. Training poses rarely reach it (it sits past their noise), but a
        rollout that pushes an object deeper than any training sample meets a stiff floor
        instead of an extrapolating network (which let held objects sink through the table).
    """

    OUTPUTS = 6

    def __init__(self, *, hidden: int = 64, steps: int = 3, mlp_layers: int = 2, mu_max: float = 1.5, slip_eps: float = 0.01,
                 gate_distance: float | None = None, gate_width: float = 0.005, dissipative: bool = False,
                 barrier_depth: float | None = None, barrier_stiffness: float = 100.0):
        super().__init__()
        self.hparams = dict(hidden=hidden, steps=steps, mlp_layers=mlp_layers, mu_max=mu_max, slip_eps=slip_eps)
        if gate_distance is not None:
            self.hparams.update(gate_distance=float(gate_distance), gate_width=float(gate_width))
        if dissipative:
            self.hparams["dissipative"] = True
        if barrier_depth is not None:
            self.hparams.update(barrier_depth=float(barrier_depth), barrier_stiffness=float(barrier_stiffness))
        self.barrier_depth, self.barrier_stiffness = barrier_depth, barrier_stiffness
        self.gate_distance, self.gate_width, self.dissipative = gate_distance, gate_width, dissipative
        nE, nN = len(G.EDGE_FEATURES), len(G.NODE_FEATURES)
        self.edge_norm, self.node_norm = Normalizer(nE), Normalizer(nN)
        self.edge_enc = mlp(nE, hidden, hidden, mlp_layers)
        self.node_enc = mlp(nN, hidden, hidden, mlp_layers)
        self.layers = nn.ModuleList([InteractionLayer(hidden, mlp_layers, update_nodes=k < steps - 1) for k in range(steps)])
        self.decoder = mlp(hidden, hidden, self.OUTPUTS, mlp_layers, layer_norm=False)
        self.mu_max, self.slip_eps = mu_max, slip_eps

    def features(self, g, vel=None, omega=None) -> tuple[torch.Tensor, torch.Tensor]:
        """The network's raw inputs: (edge [E, 41], node [N, 9]) features (``surrogate.model.graph``), before
        the normalizers; a caller that checks them (the stepper's input range) passes them back."""
        return G.edge_features(g, vel, omega), G.node_features(g, vel, omega)

    def latents(self, g, vel=None, omega=None, *, return_all: bool = False, features=None):
        """Edge latents after the processor [E, H] (all steps' (x, e) if ``return_all``); ``features``:
        ``self.features(g, vel, omega)`` if the caller has them already."""
        ef, nf = self.features(g, vel, omega) if features is None else features
        e = self.edge_enc(self.edge_norm(ef))
        x = self.node_enc(self.node_norm(nf))
        hist = [(x, e)]
        for layer in self.layers:
            x, e = layer(x, g.edge_index, e)
            hist.append((x, e))
        return hist if return_all else e

    def forward(self, g, vel=None, omega=None, *, features=None) -> torch.Tensor:
        """[E, 3] contact forces on the object side in world axes (N); ``vel``/``omega`` override node velocities;
        ``features``: precomputed inputs (``features``)."""
        if g.edge_index.shape[1] == 0:
            return g.normal.new_zeros(0, 3)
        o = self.decoder(self.latents(g, vel, omega, features=features))
        eg = G._edge_graph(g)
        Lg, V, F0 = G.units(g)
        n = g.normal
        fn = F0[eg] * nn.functional.softplus(o[:, 0])
        if self.gate_distance is not None:
            fn = fn * torch.sigmoid(-(g.dist / Lg[eg] - self.gate_distance) / self.gate_width)
        if self.barrier_depth is not None:
            fn = fn + F0[eg] * self.barrier_stiffness * torch.relu(-g.dist / Lg[eg] - self.barrier_depth)
        mu = self.mu_max * torch.sigmoid(o[:, 5])
        v, _ = G.relative_velocity(g, vel, omega)
        vt = G._tan(v, n)
        b1 = -vt / torch.sqrt((vt * vt).sum(-1, keepdim=True) + (self.slip_eps * V[eg, None]) ** 2)
        if self.dissipative:
            ft = (mu * fn * torch.sigmoid(o[:, 1]))[:, None] * b1
            return fn[:, None] * n + ft
        fr = G.contact_frames(g)
        u = o[:, 1:2] * b1 + o[:, 2:3] * torch.cross(n, b1, dim=-1) + o[:, 3:4] * fr[:, 1] + o[:, 4:5] * fr[:, 2]
        ft = (mu * fn)[:, None] * u / torch.sqrt(1.0 + (u * u).sum(-1, keepdim=True))
        return fn[:, None] * n + ft


def body_wrenches(g, force: torch.Tensor) -> torch.Tensor:
    """[N, 6] per-node wrench (force, torque about the node's COM; world axes) from per-contact forces [E, 3].

    The object receives F at the contact, the other body -F (equal and opposite).
    """
    s, o = g.edge_index
    out = force.new_zeros(g.num_nodes, 6)
    w_obj = torch.cat([force, torch.cross(g.r_obj, force, dim=-1)], dim=-1)
    w_oth = -torch.cat([force, torch.cross(g.r_oth, force, dim=-1)], dim=-1)
    out = out.index_add(0, o, w_obj)
    return out.index_add(0, s, w_oth)


def predict_contact_forces(model: ContactGNN, graph, vel=None, omega=None):
    """The hybrid stepper's call: (per-contact forces in contact frames [E, 3] as (normal, e1, e2),
    per-body wrenches [N, 6] (world axes, torque about each body's COM), contact frames [E, 3, 3])."""
    f = model(graph, vel, omega)
    fr = G.contact_frames(graph)
    local = torch.einsum("eij,ej->ei", fr, f)
    return local, body_wrenches(graph, f), fr


def count_parameters(model: nn.Module) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def _mlp_flops(seq: nn.Sequential) -> int:
    fl = 0
    for m in seq:
        if isinstance(m, nn.Linear):
            fl += 2 * m.in_features * m.out_features
        elif isinstance(m, nn.LayerNorm):
            fl += 5 * m.normalized_shape[0]
        elif isinstance(m, nn.SiLU):
            fl += 0  # counted as elementwise below
    return fl


def model_cost(model: ContactGNN, *, nodes_per_contact: float = 0.5) -> dict:
    """Parameter count and multiply-add FLOPs (2 per MAC, LayerNorm ~5/elem) per contact.

    Edge work is per contact; node work (encoder, node MLPs) is shared, counted as
    ``nodes_per_contact`` nodes per contact (0.5 for a box resting on the ground: 2 nodes, 4 contacts).
    """
    edge = _mlp_flops(model.edge_enc) + _mlp_flops(model.decoder) + sum(_mlp_flops(l.edge_mlp) for l in model.layers)
    node = _mlp_flops(model.node_enc) + sum(_mlp_flops(l.node_mlp) for l in model.layers if l.node_mlp is not None)
    H = model.hparams["hidden"]
    edge += len(model.layers) * 2 * H + 150  # aggregation adds, feature + force assembly (approx.)
    return {"parameters": count_parameters(model), "flops_per_contact": int(edge + nodes_per_contact * node),
            "edge_flops": int(edge), "node_flops": int(node)}
