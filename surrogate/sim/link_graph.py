"""The hybrid stepper's contacts of an articulated object (several links: ``scenes.articulated_body``).

``model.batch_graph.GraphBuilder`` orients every owned contact towards ONE object body: a contact whose geom2 is
not on it is read the other way round, so a floor contact of a second link would have the floor as the "object"
and the link as the "other" body, and its Jacobian would mix the base link's dofs in. ``LinkGraphBuilder`` keeps
every table of the base class and changes two things:

* ``contact_set``: the object side of a contact is the geom on ANY link of the object (``object_bodies``);
* ``body_chain`` [nbody, nv]: each body's dof chain, from which ``law_solve.contact_jacobians`` builds every
  contact's relative-velocity Jacobian with the dofs of the link it touches (``link_jacobians``): the base's free
  joint and every joint between the base and that link, minus the other body's chain.

What stays base-link centred: the object node of the contact graph (its features and ``node_wrenches``, whose
object row sums every link's contact forces with lever arms about the base link's centre of mass), the
law's reference mass (the base link's) and length (``length``). A constant law (no network: the releases so far)
reads none of the graph's features, so its forces and their generalized forces ``J^T F`` are exact per link;
``tests/test_elbow_stepper.py`` checks MuJoCo's own forces through this path against ``mj_step``.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np

from ..model.batch_graph import GraphBuilder, _dof_chain
from ..model.law import cross


class LinkGraphBuilder(GraphBuilder):
    """A ``GraphBuilder`` whose object is every body of ``object_bodies`` (the base link first)."""

    def __init__(self, model: mujoco.MjModel, *, object_bodies: Sequence[int], length: float,
                 owned_pair_ids: Sequence[int]):
        super().__init__(model, object_body=int(object_bodies[0]), length=length, owned_pair_ids=owned_pair_ids)
        self.object_bodies = np.asarray(object_bodies, dtype=np.int64)
        self.on_object = np.zeros(model.nbody, dtype=bool)
        self.on_object[self.object_bodies] = True
        self.body_chain = np.stack([_dof_chain(model, b) for b in range(model.nbody)]).astype(np.float64)

    def on_object_body(self, bodies: np.ndarray) -> np.ndarray:
        return self.on_object[bodies]  # a contact on any link is the object's


def scene_builder(scene, model: mujoco.MjModel, owned_pair_ids: Sequence[int]) -> GraphBuilder:
    """The graph builder of a scene's object (the stepper's and the twin's): a ``LinkGraphBuilder`` owning the
    contacts of every link of an articulated object (``object_link_bodies``), else a ``GraphBuilder`` of the one
    object body."""
    links = scene.meta.get("object_link_bodies") or []
    if len(links) > 1:
        return LinkGraphBuilder(model, object_bodies=links, owned_pair_ids=owned_pair_ids,
                                length=float(scene.meta.get("object_link_size", scene.obj.size)))
    return GraphBuilder(model, object_body=scene.object_body_id, length=scene.obj.size, owned_pair_ids=owned_pair_ids)


def link_jacobians(builder: LinkGraphBuilder, cb) -> np.ndarray:
    """[E, 3, nv] every contact's relative-velocity Jacobian (the object link's point minus the other body's), as
    ``mj_jac`` computes it: ``J[:, j] = s_j (cdof_lin[j] + cdof_ang[j] x (p - subtree_com[root(j)]))`` with
    ``s_j`` = (j moves the touched link) - (j moves the other body)."""
    pos, cdof, _, _, dof_com = cb.dynamics
    cs = cb.contact_set
    gb = builder.geom_body
    sign = builder.body_chain[gb[cs.g_obj]] - builder.body_chain[gb[cs.g_oth]]  # [E, nv]
    cd = cdof[cs.env]  # [E, nv, 6]: (angular, linear)
    cols = cd[..., 3:] + cross(cd[..., :3], pos[:, None, :] - dof_com[cs.env])  # [E, nv, 3]
    return np.ascontiguousarray((sign[..., None] * cols).transpose(0, 2, 1))
