"""What a checkpoint's contact law assumes, and whether a scene is inside it (issue 26, item 4).

A checkpoint's card states, per contact group of the law (``model.contact_law.GROUPS``: ``surface``, the object against
static surfaces; ``body``, against moving bodies such as a hand's pads), whether its training data held such contacts,
against what, and in which units the law's parameters are (``data.contact_groups``, written by training from the
captures: ``contact_groups_of``). A law whose ``body`` group never saw a contact (the cube release: free tosses on the
ground) has only its untouched prior there, so a scene whose owned pairs include pads is refused with that reason
rather than stepped with a law nobody fitted. A ``body`` law fitted to one hand's pads and used on another robot's
fingers is a material law in SI units: valid as far as the materials are alike, which the stepper cannot know; it says
so once (a ``SurrogateWarning``) instead of refusing.
"""

from __future__ import annotations

import warnings

from ..errors import ConfigError
from .hybrid_step import SurrogateWarning

GROUP_OF_ROLE = {"pad-object": "body", "object-table": "surface", "object-ground": "surface"}
UNTRAINED_POLICIES = ("refuse", "allow")


def contact_groups_of(meta, *, units: dict) -> dict:
    """The card's ``data.contact_groups`` of a training on captures with metadata ``meta`` (``capture`` metadata:
    ``name``, ``hand``): every capture holds the object against its ground or table; only captures with a hand hold it
    against moving bodies. ``units``: {group: the law's units there, ``si`` or ``weight``}."""
    hand = meta.hand if isinstance(meta.hand, dict) else None
    surface = {"trained": True, "against": f"the ground or table of the captures {meta.name!r}", "units": units["surface"]}
    if hand is None:
        body = {"trained": False, "against": None, "units": units["body"]}
    else:
        body = {"trained": True, "hand": str(hand.get("name")),
                "against": f"the pads of hand {hand.get('name')!r} ({hand.get('model')}) in the captures {meta.name!r}",
                "units": units["body"]}
        if hand.get("pad_material"):  # what the captures say their pads are (the rig: its elastomer and config)
            body["pad_material"] = str(hand["pad_material"])
    return {"surface": surface, "body": body}


def check_contact_groups(groups: dict | None, scene, roles, *, untrained: str = "refuse", source: str = "the contact model"):
    """Refuse (``ConfigError``) a scene whose owned pairs of ``roles`` need a contact group that ``groups`` (a card's
    ``data.contact_groups``; None: nothing stated, nothing checked) says was never trained, unless ``untrained`` is
    ``allow``; warn once when the ``body`` law was fitted to another hand's pads than the scene's."""
    if untrained not in UNTRAINED_POLICIES:
        raise ConfigError(f"untrained_groups must be one of {list(UNTRAINED_POLICIES)}, got {untrained!r}",
                          key="untrained_groups")
    if not groups:
        return
    used = {}
    for name in scene.owned_pairs:
        role = scene.pair_roles[name]
        if role in roles:
            used.setdefault(GROUP_OF_ROLE[role], name)
    for group, pair in used.items():
        stated = groups.get(group) or {}
        if stated.get("trained", True) or untrained == "allow":
            continue
        others = [f"{g}: {s.get('against')}" for g, s in groups.items() if s.get("trained")]
        raise ConfigError(
            f"{source} never saw a {group!r} contact (the object against "
            f"{'moving bodies, e.g. a hand' if group == 'body' else 'static surfaces'}): it was trained on "
            f"{'; '.join(others) or 'nothing stated'}, so its law there is an unfitted prior; this scene's owned pair "
            f"{pair!r} is one. Use a checkpoint trained with such contacts (e.g. the release rig_default for a hand's "
            f"pads), keep those pairs analytic (roles), or pass untrained_groups='allow' to step them with that prior "
            f"(Stepper's options; an environment takes them as stepper_options={{'untrained_groups': 'allow'}})",
            key="untrained_groups")
    body = groups.get("body") or {}
    hand = (getattr(scene, "meta", None) or {}).get("hand")
    if "body" in used and body.get("trained") and body.get("hand") and hand != body["hand"]:
        material = body.get("pad_material") or "a pad material the captures did not state"
        warnings.warn(f"{source}: its pad law was fitted against {body.get('against')} ({material}); here it acts "
                      f"on {'hand ' + repr(hand) if hand else 'the geoms of a model it did not see'} "
                      f"({body.get('units')} units: a material's law, valid as far as the materials are alike)",
                      SurrogateWarning, stacklevel=3)
