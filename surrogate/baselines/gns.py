"""An end-to-end learned rigid-body step in the style of the graph network simulator (GNS).

The peer of the hybrid surrogate: it learns the whole step, free flight and contact, with no
MuJoCo (Sanchez-Gonzalez et al. 2020; Allen et al., CoRL 2022, on these cube tosses)::

    nodes: V points on the object's surface (the box corners, or a lattice on each face)
    edges: every ordered pair of nodes (the object is one small rigid body)
    input: the last H + 1 positions of every node -> H finite-difference velocities
    node feats [N, 4H + 7] --norm--> MLP --> h      edge feats [E, 4] --norm--> MLP --> e
    M x InteractionLayer (surrogate.model.layers: e <- e + MLP([e, h_src, h_dst]), h <- h + MLP([h, sum e]))
    decoder MLP(h) -> normalized per-node acceleration (3) -> a = R (o std + mean)  [L / frame^2]
    step: x' = x + (x - x_prev) + a, then shape matching (Kabsch) of x' onto the body points
          gives the rigid pose; the nodes are put back on it, so the object stays rigid.

Units: the learned core never sees metres or seconds: lengths are in L (the object's size, its
largest bounding-box side) and times in frame periods (velocities in L / frame, accelerations in
L / frame^2). Invariance: every vector is expressed in the body frame of the current (shape-
matched) pose, and the floor enters as each node's height above it, so the features, hence the
predicted motion, do not depend on horizontal position or yaw (nor on any rotation about gravity).
The input, edge and target normalizers are running mean/std buffers (``model.layers.Normalizer``), part of
the state dict, so of the checkpoint.

Shapes: B = bodies, V = nodes per body, H = history (velocities), N = B V nodes, E = B V (V - 1) edges.
"""

from __future__ import annotations

import torch
from torch import nn

from ..model.checkpoint import register_peer
from ..model.layers import InteractionLayer, Normalizer, count_parameters, mlp
from .gns_geometry import rigid_points, shape_match

FEATURE_VERSION = "gns-1"


def node_feature_names(history: int) -> list[str]:
    """Names of the node features for ``history`` velocities (newest first)."""
    vel = [f"vel{k}_body_{a}" for k in range(history) for a in "xyz"]
    return [*vel, *[f"vel{k}_up" for k in range(history)], "floor_height", "gravity_body_x", "gravity_body_y",
            "gravity_body_z", "rest_x", "rest_y", "rest_z"]


EDGE_FEATURES = ("disp_body_x", "disp_body_y", "disp_body_z", "dist")
FEATURE_DOC = {
    "vel{k}_body_*": "x(t-k) - x(t-k-1) of the node, in the body frame of the pose at t, L per frame",
    "vel{k}_up": "the same velocity along the world up axis (against gravity), L per frame",
    "floor_height": "height of the node above the floor, L, clipped at floor_clip",
    "gravity_body_*": "unit gravity direction in the body frame at t",
    "rest_*": "the node's body-frame point, L (node identity)",
    "disp_body_*, dist": "x_src - x_dst at t in the body frame at t, L, and its norm",
    "target": "x(t+1) - 2 x(t) + x(t-1) of the node in the body frame at t, L per frame^2",
}
UNITS = {"L": "object size (largest bounding-box side), m", "T": "frame period (1 / capture rate), s"}


def complete_edges(n_bodies: int, n_nodes: int) -> torch.Tensor:
    """[2, B V (V - 1)] (source, target) of every ordered pair of distinct nodes within each body."""
    i, j = torch.meshgrid(torch.arange(n_nodes), torch.arange(n_nodes), indexing="ij")
    keep = i != j
    base = torch.stack([i[keep], j[keep]])
    offs = (torch.arange(n_bodies) * n_nodes).repeat_interleave(base.shape[1])
    return base.repeat(1, n_bodies) + offs


def features(hist: torch.Tensor, body: torch.Tensor, up: torch.Tensor, floor: torch.Tensor, *, floor_clip: float):
    """Invariant node and edge features of a batch of point histories.

    Args:
      hist: [B, H + 1, V, 3] points at frames t-H ... t, L (any origin); rigid at t.
      body: [B, V, 3] body-frame points, L.  up: [B, 3] unit vector against gravity.
      floor: [B] height of the floor along ``up``, L.
    Returns:
      node [B V, 4H + 7], edge [B V (V - 1), 4] (float32), edge_index, R [B, 3, 3] (float64):
      the body-to-world rotation of the pose at t that every vector was expressed in.
    """
    B, H1, V, _ = hist.shape
    R, _ = shape_match(hist[:, -1], body)
    vel = hist[:, 1:] - hist[:, :-1]                                   # [B, H, V, 3], oldest first
    vel = vel.flip(1)                                                  # newest first
    vel_body = torch.einsum("bji,bhvj->bvhi", R, vel)                  # R^T v
    vel_up = torch.einsum("bhvi,bi->bvh", vel, up)
    height = (torch.einsum("bvi,bi->bv", hist[:, -1], up) - floor[:, None]).clamp(max=floor_clip)
    g_body = torch.einsum("bji,bj->bi", R, -up)[:, None].expand(B, V, 3)
    node = torch.cat([vel_body.reshape(B, V, -1), vel_up, height[..., None], g_body, body], dim=-1)
    ei = complete_edges(B, V).to(hist.device)
    x = hist[:, -1].reshape(B * V, 3)
    disp = x[ei[0]] - x[ei[1]]
    Rb = R.repeat_interleave(V * (V - 1), dim=0)
    disp_body = torch.einsum("eji,ej->ei", Rb, disp)
    edge = torch.cat([disp_body, disp_body.norm(dim=-1, keepdim=True)], dim=-1)
    return node.reshape(B * V, -1).float(), edge.float(), ei, R


class GNSNet(nn.Module):
    """Per-node accelerations of a rigid object from its point history (encode-process-decode, residual).

    Args:
      hidden: latent width.  steps: message-passing steps.  mlp_layers: linear layers per MLP.
      history: H, the velocities in the input (H + 1 positions).  grid: points per box edge on each
        face (2: the 8 corners; ``gns_geometry.box_points``).  floor_clip: node heights above this (L)
        are clipped (far from the floor the height carries no contact information).
    """

    DESCRIPTION = "end-to-end learned step (GNS, no MuJoCo)"  # the card's, and the benchmark row's, description

    def __init__(self, *, hidden: int = 64, steps: int = 4, mlp_layers: int = 2, history: int = 3, grid: int = 2,
                 floor_clip: float = 1.0):
        super().__init__()
        self.hparams = dict(hidden=hidden, steps=steps, mlp_layers=mlp_layers, history=history, grid=grid,
                            floor_clip=float(floor_clip))
        self.history, self.grid, self.floor_clip = int(history), int(grid), float(floor_clip)
        n_node, n_edge = len(node_feature_names(self.history)), len(EDGE_FEATURES)
        self.node_norm, self.edge_norm, self.target_norm = Normalizer(n_node), Normalizer(n_edge), Normalizer(3)
        self.node_enc = mlp(n_node, hidden, hidden, mlp_layers)
        self.edge_enc = mlp(n_edge, hidden, hidden, mlp_layers)
        self.layers = nn.ModuleList([InteractionLayer(hidden, mlp_layers, update_nodes=True) for _ in range(steps)])
        self.decoder = mlp(hidden, hidden, 3, mlp_layers, layer_norm=False)

    def forward(self, node: torch.Tensor, edge: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """[N, 3] normalized accelerations (body frame) from raw node [N, F] and edge [E, 4] features."""
        h = self.node_enc(self.node_norm(node))
        e = self.edge_enc(self.edge_norm(edge))
        for layer in self.layers:
            h, e = layer(h, edge_index, e)
        return self.decoder(h)

    def accelerations(self, hist, body, up, floor) -> torch.Tensor:
        """[B, V, 3] world accelerations, L / frame^2 (float64), of point histories (see ``features``)."""
        node, edge, ei, R = features(hist, body, up, floor, floor_clip=self.floor_clip)
        mean, std = self.target_norm.stats()
        a_body = (self(node, edge, ei) * std + mean).double().reshape(hist.shape[0], hist.shape[2], 3)
        return torch.einsum("bij,bvj->bvi", R, a_body)


@torch.no_grad()
def step(model: GNSNet, hist, body, up, floor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One learned step: (points at t+1 [B, V, 3], put back on the rigid pose; R [B, 3, 3]; p [B, 3]), L."""
    x, x_prev = hist[:, -1], hist[:, -2]
    x_next = 2.0 * x - x_prev + model.accelerations(hist, body, up, floor)
    R, p = shape_match(x_next, body)
    return rigid_points(R, p, body), R, p


def gns_cost(model: GNSNet) -> dict:
    """Parameter count and approximate multiply-add FLOPs of one step of one body (2 per MAC)."""
    V = 6 * model.grid ** 2 - 12 * model.grid + 8  # surface points of a grid^3 lattice
    E = V * (V - 1)

    def fl(seq):
        return sum(2 * m.in_features * m.out_features for m in seq if isinstance(m, nn.Linear))

    node = fl(model.node_enc) + fl(model.decoder) + sum(fl(layer.node_mlp) for layer in model.layers)
    edge = fl(model.edge_enc) + sum(fl(layer.edge_mlp) for layer in model.layers)
    return {"parameters": count_parameters(model), "nodes": V, "edges": E, "flops_per_step": int(V * node + E * edge)}


def feature_card(model: GNSNet) -> dict:
    """The card's ``features`` section: definitions, units and the normalizers (also buffers in the weights)."""
    stats = {}
    for name in ("node", "edge", "target"):
        mean, std = getattr(model, f"{name}_norm").stats()
        stats[f"{name}_mean"], stats[f"{name}_std"] = mean.tolist(), std.tolist()
    return {"version": FEATURE_VERSION, "node": node_feature_names(model.history), "edge": list(EDGE_FEATURES),
            "definitions": FEATURE_DOC, "units": UNITS, "graph": "every ordered pair of the body's nodes; the floor "
            "enters as each node's height", "normalization": {**stats, "samples": float(model.node_norm.count)},
            "output": "per node: x(t+1) - 2 x(t) + x(t-1) in L / frame^2 (body frame, normalized by target_mean/std); "
                      "the pose at t+1 by shape matching of the integrated nodes onto the body points"}


def feature_mismatch(features: dict, hparams: dict) -> str | None:
    """Why a card's ``features`` cannot feed this package's ``GNSNet`` built from ``hparams`` (None if they can)."""
    h = hparams.get("history", 3)
    if not (isinstance(h, int) and not isinstance(h, bool) and 1 <= h <= 16):
        return f"model.hparams.history must be an integer in [1, 16], got {h!r}"
    want = node_feature_names(h)
    if features.get("version") != FEATURE_VERSION or features.get("node") != want or features.get("edge") != list(EDGE_FEATURES):
        return f"version {features.get('version')!r} against this package's {FEATURE_VERSION!r}"
    return None


register_peer(GNSNet, gns_cost, feature_card, feature_mismatch)  # its checkpoints export and load
