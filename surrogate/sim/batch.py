"""The batched contact-graph builder, used by the stepper; it lives in ``surrogate.model.batch_graph`` (the one
graph builder of training and stepping) and is re-exported here."""

from ..model.batch_graph import ContactBatch, ContactGraph, GraphBuilder, concat_graphs  # noqa: F401

__all__ = ["ContactBatch", "ContactGraph", "GraphBuilder", "concat_graphs"]
