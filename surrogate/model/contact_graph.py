"""The batched contact graph as plain attributes (``ContactGraph``; its fields are ``batch_graph``'s module docstring)
and the concatenation of several (``concat_graphs``: the twin steps many scenes as one graph).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np
import torch
from torch_geometric.data import Data


class ContactGraph(SimpleNamespace):
    """The batched graph as plain attributes (the fields of the module docstring).

    Everything ``ContactLawGNN`` reads is an attribute, as on a PyG ``Data``; building a ``Data``
    costs ~0.5 ms per call in PyG's attribute storage, so the stepper does not. ``to_pyg()``
    gives a real ``Data`` for PyG tools.
    """

    def to_pyg(self) -> Data:
        return Data(**vars(self))


# the graph's integer fields (everything else is float)
INT_FIELDS = ("edge_index", "object_index", "batch", "env", "contact_id", "body_id")
_EDGE_FIELDS = ("normal", "dist", "r_obj", "r_oth", "tangent", "geom_obj", "geom_oth", "contact_id", "sign")
_NODE_FIELDS = ("vel", "omega", "mass", "inertia", "static", "is_object", "body_id")
_ENV_FIELDS = ("gravity", "length", "mass_ref", "inertia_w", "dt")


def concat_graphs(graphs: Sequence[ContactGraph]) -> ContactGraph:
    """One ``ContactGraph`` of several (e.g. of different scenes): environments, nodes and edges in order.

    Node indices (``edge_index``, ``object_index``) and environment indices (``batch``, ``env``) are
    offset; every other field is concatenated. Per-scene tables (``contact_id``, ``body_id``) keep
    their meaning within their own scene.
    """
    if len(graphs) == 1:
        return graphs[0]
    node_off = np.cumsum([0] + [g.num_nodes for g in graphs])[:-1]
    env_off = np.cumsum([0] + [len(g.object_index) for g in graphs])[:-1]
    out = {"num_nodes": int(sum(g.num_nodes for g in graphs))}
    out["edge_index"] = torch.cat([g.edge_index + int(o) for g, o in zip(graphs, node_off)], dim=1)
    out["object_index"] = torch.cat([g.object_index + int(o) for g, o in zip(graphs, node_off)])
    out["batch"] = torch.cat([g.batch + int(o) for g, o in zip(graphs, env_off)])
    out["env"] = torch.cat([g.env + int(o) for g, o in zip(graphs, env_off)])
    for k in _EDGE_FIELDS + _NODE_FIELDS + _ENV_FIELDS:
        out[k] = torch.cat([getattr(g, k) for g in graphs])
    return ContactGraph(**out)
