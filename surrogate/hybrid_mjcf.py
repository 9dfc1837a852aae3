"""The hybrid stepper on the user's own model: ``surrogate.hybrid(model, owned=[...])``.

    import surrogate
    h = surrogate.hybrid("robot.xml", owned=["box_geom"])     # or an MjSpec, or the MjModel last loaded from XML
    d = h.make_data()                                        # an MjData of h.model (not of the user's MjModel)
    h.step(d, nstep=10)                                      # or sim.step(h.model, d, h.stepper); copies: h.copies(64)
    model, stepper = h                                       # the two, unpacked

The model is turned into a ``Scene`` by ``scenes.from_model`` (every contact of the owned geoms an explicit, owned
pair; their default collisions excluded) and stepped by the project's one ``sim.Stepper``: nothing here knows a
hand. ``h.model`` is a new ``MjModel`` with the same bodies, joints, actuators and sensors as the user's (MjData
sizes agree), plus the owned pairs: step that one. Each step puts its owned pairs in the mode it steps (after a
surrogate step they apply no force: plain ``mj_step`` on it lets the object fall through);
``h.stepper.set_mode(model, "analytic")`` gives MuJoCo's own contact back to it or to a copy (``copy.copy(h.model)``)
for plain MuJoCo, a viewer or ``mujoco.rollout``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mujoco

from .paths import release_checkpoint
from .scenes.from_model import scene_from_model
from .scenes.scene import Scene
from .sim.copies import Copies
from .sim.stepper import Stepper, step

DEFAULT_CHECKPOINT = "rig_default"  # the released law, used when neither checkpoint nor contact_model is given


@dataclass
class Hybrid:
    """What ``hybrid`` returns: the model to step, its stepper and the scene behind them.

    Attributes:
      model: the compiled ``MjModel`` to step (the user's model plus the owned pairs).
      stepper: the ``sim.Stepper`` (``set_mode``, ``stats()``, ``contact``).
      scene: the ``Scene`` (``owned_pairs``, ``pair_roles``, ``obj``: the owned body as an ``ObjectAsset``).
    """

    model: mujoco.MjModel
    stepper: Stepper
    scene: Scene

    def __iter__(self):  # ``model, stepper = surrogate.hybrid(...)``
        return iter((self.model, self.stepper))

    def make_data(self, *, key: int | str | None = None) -> mujoco.MjData:
        """A fresh ``MjData`` of ``model`` at ``qpos0`` or at keyframe ``key`` (id or name), after ``mj_forward``."""
        d = mujoco.MjData(self.model)
        if key is not None:
            k = key if isinstance(key, int) else self.model.key(key).id
            mujoco.mj_resetDataKeyframe(self.model, d, k)
        mujoco.mj_forward(self.model, d)
        return d

    def step(self, data, *, nstep: int = 1, contact: str | None = None) -> None:
        """Advance ``data`` (an ``MjData`` of ``model``, a list of them, or ``copies(B)``) by ``nstep`` physics steps;
        ``contact`` overrides the stepper's ``surrogate`` / ``analytic`` for this call (``sim.step``)."""
        step(data.model if isinstance(data, Copies) else self.model, data, self.stepper, nstep=nstep, contact=contact)

    def copies(self, n: int) -> Copies:
        """``n`` copies of the model in one ``MjModel`` (``sim.copies.Copies``), each at ``qpos0``; step them with
        ``step``."""
        return Copies(self.scene, n)


def hybrid(model, *, owned: Sequence[str], checkpoint=None, contact_model=None, contact: str = "surrogate",
           owned_margin: float = 0.005, **stepper_options) -> Hybrid:
    """The hybrid stepper on any MJCF: the learned contact model owns every contact of the ``owned`` geoms.

    Args:
      model: the user's model: an MJCF path, an ``MjSpec`` (not modified) or an ``MjModel`` (only the last one
        MuJoCo loaded from XML: its MJCF is recovered with ``mj_saveLastXML``, current parameter values included).
      owned: names of the geoms whose contacts the contact model owns, all on one free body (the object: its size
        is the law's unit of length, its weight the force guard's unit).
      checkpoint: a checkpoint folder (default: the released ``rig_default``); ignored when ``contact_model`` is
        given.
      contact_model: a loaded contact model (``ContactLawGNN``, ``sim.ZeroContact``, ``sim.MuJoCoContact`` ...).
      contact: ``surrogate`` or ``analytic`` (MuJoCo's own contact on the same model; ``stepper.set_mode``).
      owned_margin: m, the owned pairs report contacts within it.
      **stepper_options: ``sim.Stepper``'s options (``on_bad_force``, ``max_force``, ``roles``, ...).
    Returns:
      ``Hybrid`` (``model``, ``stepper``, ``scene``; unpacks as ``model, stepper``).
    Raises:
      ConfigError: bad ``owned`` (an unknown geom, geoms of two bodies, a body that is not free, some of a body's
        collidable geoms), a model that cannot be read (see ``scenes.from_model.scene_from_model``), bad stepper
        options, ``contact="surrogate"`` where the stepper cannot step it (``sim.Stepper.check_surrogate``: no gravity,
        RK4, an owned pair with a mocap body).
    Warns:
      UserWarning: MuJoCo's own contacts on the owned object's dofs (``scenes.from_model.check_ownership``).
    """
    scene = scene_from_model(model, owned=owned, owned_margin=owned_margin)
    if contact_model is None:
        contact_model = release_checkpoint(DEFAULT_CHECKPOINT) if checkpoint is None else checkpoint
    stepper = Stepper(scene, contact_model, contact=contact, **stepper_options)
    return Hybrid(model=scene.model, stepper=stepper, scene=scene)
