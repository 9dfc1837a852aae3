"""The building blocks of the contact networks (``contact_law.ContactLawGNN``; the end-to-end peer reuses them).

* ``Normalizer``: running per-feature mean/std buffers, accumulated during the first ``max_accumulations``
  training batches and part of the state dict (so of the checkpoint): the learned core sees only normalized
  nondimensional features.
* ``mlp``: Linear + SiLU layers, LayerNorm on the output (Battaglia et al. 2018; GNS).
* ``InteractionLayer``: one message-passing step of an encode-process-decode network that keeps both the edge
  and the node update (residual).
* ``count_parameters`` / ``mlp_flops``: the sizes a checkpoint card records.
"""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric.nn import MessagePassing


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
    """[*, n_in] -> [*, n_out]: ``layers`` Linear layers (SiLU between), LayerNorm on the output if ``layer_norm``."""
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


def count_parameters(model: nn.Module) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def mlp_flops(seq: nn.Sequential) -> int:
    """FLOPs of one pass of an ``mlp`` for one input row: 2 per multiply-add, ~5 per LayerNorm element (the
    activations are not counted)."""
    fl = 0
    for m in seq:
        if isinstance(m, nn.Linear):
            fl += 2 * m.in_features * m.out_features
        elif isinstance(m, nn.LayerNorm):
            fl += 5 * m.normalized_shape[0]
    return fl
