"""Hybrid stepping: a contact model inside MuJoCo, batched (``stepper``; its graph builder is
``surrogate.model.batch_graph``), B environments as copies in one ``MjModel`` (``copies.Copies``: the batch fast path),
contact models and input-range checks (``contact``), the one rollout API with its
analytic and surrogate backends (``from surrogate.sim.rollout import rollout``; not re-exported here, so
that ``surrogate.sim.rollout`` stays the module) and the differentiable twin (``twin``, with its rigid-body
step ``rigid_body``). The studies that use it (speed, soak) are in ``surrogate.bench``."""

from surrogate.model.batch_graph import ContactBatch, GraphBuilder
from surrogate.sim.contact import ContactModel, InputRange, MuJoCoContact, ZeroContact
from surrogate.sim.copies import Copies
from surrogate.sim.stepper import (
    BAD_FORCE_POLICIES,
    CONTACT_MODES,
    Stepper,
    SurrogateStepError,
    SurrogateWarning,
    step,
)

__all__ = [
    "BAD_FORCE_POLICIES", "CONTACT_MODES", "ContactBatch", "ContactModel", "Copies", "GraphBuilder", "InputRange",
    "MuJoCoContact", "Stepper", "SurrogateStepError", "SurrogateWarning", "ZeroContact", "step",
]
