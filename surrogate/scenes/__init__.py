"""MuJoCo scenes built with ``MjSpec``: an object, an optional hand, a table or
the ground, and the contact pairs an external contact model owns.

    scene = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")
    d = scene.make_data()
    set_contact_mode(scene.model, scene, "external")   # MuJoCo detects, applies no force
    mujoco.mj_step1(scene.model, d)
    idx = owned_contacts(scene.model, d, scene)       # the surrogate's candidates

See ``scene`` for how the switch works in MuJoCo 4.0 (pair margin and gap).
"""

from surrogate.scenes.builder import (
    CODE_HANDS,
    CONES,
    GRASPING_HANDS,
    HANDS,
    SETTINGS,
    TABLE_HEIGHT,
    build_scene,
    stable_quat,
)
from surrogate.scenes.from_model import scene_from_model
from surrogate.scenes.hands import (
    BASE_JOINTS,
    HAND_BUILDERS,
    HandInfo,
    actuator_ids,
    add_hand,
    add_parallel_jaw,
    add_three_finger,
    hand_ctrl,
    set_grip_force,
)
from surrogate.scenes.object_body import OBJECT_BODY, OBJECT_JOINT, add_object_body, piece_geom_name
from surrogate.scenes.scene import (
    ANALYTIC_PREFIX,
    MODES,
    OWNED_PREFIX,
    ROLES,
    Scene,
    contact_modes,
    contact_pair_index,
    contact_roles,
    owned_contacts,
    set_contact_mode,
)

__all__ = [
    "ANALYTIC_PREFIX", "BASE_JOINTS", "CODE_HANDS", "CONES", "GRASPING_HANDS", "HANDS", "HAND_BUILDERS", "MODES",
    "OBJECT_BODY", "OBJECT_JOINT",
    "OWNED_PREFIX", "ROLES", "SETTINGS", "TABLE_HEIGHT", "HandInfo", "Scene", "actuator_ids", "add_hand",
    "add_object_body", "add_parallel_jaw", "add_three_finger", "build_scene", "contact_modes",
    "contact_pair_index", "contact_roles", "hand_ctrl", "owned_contacts", "piece_geom_name", "scene_from_model",
    "set_contact_mode", "set_grip_force", "stable_quat",
]
