"""Scenes: compile for every family and hand, settle under analytic contact,
owned pairs detected without force in external mode, analytic mode equal to a
margin-0 model, and a gripper that holds a lifted box."""

from __future__ import annotations

import copy

import mujoco
import numpy as np
import pytest

from surrogate.errors import ConfigError
from surrogate.objects.families import make_object
from surrogate.scenes import (
    HANDS,
    SETTINGS,
    build_scene,
    contact_modes,
    contact_roles,
    hand_ctrl,
    owned_contacts,
    set_contact_mode,
    set_grip_force,
    stable_quat,
)

FAMILIES = [
    "box", "cylinder", "sphere", "capsule", "ellipsoid",
    "superquadric", "triangular_prism", "convex_hull", "lshape", "dumbbell",
]


def _obj_state(scene, d):
    a, v = scene.object_qpos_adr, scene.object_dof_adr
    return d.qpos[a:a + 7].copy(), d.qvel[v:v + 6].copy()


def _run(model, d, seconds):
    for _ in range(int(round(seconds / model.opt.timestep))):
        mujoco.mj_step(model, d)


# ----------------------------------------------------------------------------- building


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_compiles_with_every_hand_and_setting(family):
    obj = make_object(family, 0)
    for hand in HANDS:
        for setting in SETTINGS:
            s = build_scene(obj, hand=hand, setting=setting)
            m = s.model
            # Explicit inertial: the asset's mass, never the geoms'.
            assert m.body_mass[s.object_body_id] == pytest.approx(obj.mass, rel=1e-12)
            assert m.body(s.object_body_id).name == "object"
            assert m.joint("object_free").type[0] == mujoco.mjtJoint.mjJNT_FREE
            assert len(s.object_geom_ids) == len(obj.pieces)
            assert (m.geom_contype[s.object_geom_ids] == 0).all()
            assert (m.geom_conaffinity[s.object_geom_ids] == 0).all()
            # One owned pair per (surface or pad) x piece, each with a role.
            surfaces = ["ground"] + (["table"] if setting == "table" else [])
            pads = list(s.hand.pad_geom_names) if s.hand else []
            assert len(s.owned_pairs) == len(obj.pieces) * (len(surfaces) + len(pads))
            for i in range(len(obj.pieces)):
                for g in surfaces + pads:
                    assert f"own:{g}:obj_piece{i}" in s.owned_pairs
            assert set(s.pair_roles.values()) <= {"pad-object", "object-table", "object-ground"}
            assert all(n.startswith("ana:") for n in s.analytic_pairs)
            assert set(contact_modes(m, s).values()) == {"analytic"}
            d = s.make_data()
            # Resting: touching the surface, no penetration beyond round-off.
            idx = owned_contacts(m, d, s)
            assert len(idx) > 0
            assert d.contact.dist[idx].min() > -1e-6
            # At rest the only contacts are the object on its surface: the open
            # hand starts clear of the object and of the table.
            roles = contact_roles(m, d, s)
            assert set(roles) == {"object-table" if setting == "table" else "object-ground"}
            if s.hand is not None:
                for name in s.hand.sensor_names:
                    assert m.sensor(name).dim[0] == 3


def test_hand_names_and_actuation():
    obj = make_object("box", 0)
    tf = build_scene(obj, hand="three_finger")
    h = tf.hand
    finger_hinges = [j for j in h.finger_joint_names if tf.model.joint(j).type[0] == mujoco.mjtJoint.mjJNT_HINGE]
    assert len(finger_hinges) >= 9
    assert {f"f{i}_j{k}" for i in range(3) for k in range(3)} <= set(h.finger_joint_names)
    assert len(h.finger_actuator_names) >= 9
    assert tf.model.nu == len(h.actuator_names) == 4 + len(h.finger_actuator_names)
    assert h.pad_geom_names == ("pad_f0", "pad_f1", "pad_f2")
    assert h.sensor_names[:2] == ("ft_f0_force", "ft_f0_torque")
    # Radians, not MjSpec's default degrees.
    assert tf.model.joint("f0_j1").range[1] == pytest.approx(1.7)

    pj = build_scene(obj, hand="parallel_jaw")
    h = pj.hand
    assert h.pad_geom_names == ("pad_left", "pad_right")
    assert h.pad_site_names == ("pad_left_site", "pad_right_site")
    assert set(h.sensor_names) == {"ft_left_force", "ft_left_torque", "ft_right_force", "ft_right_torque"}
    assert h.base_joint_names == ("hand_x", "hand_y", "hand_z", "hand_yaw")
    assert 0.09 <= h.max_opening <= 0.11
    assert (pj.model.body_gravcomp[[pj.model.body(b).id for b in h.bodies]] == 1).all()
    set_grip_force(pj.model, h, 25.0)
    a = pj.model.actuator("act_left").id
    assert tuple(pj.model.actuator_forcerange[a]) == (-25.0, 25.0)
    np.testing.assert_allclose(hand_ctrl(h, base=(0, 0, -0.1, 0), grip=1.0), [0, 0, -0.1, 0, *h.closed_command])


def test_bad_options_raise():
    obj = make_object("box", 0)
    with pytest.raises(ConfigError):
        build_scene(obj, hand="octopus")
    with pytest.raises(ConfigError):
        build_scene(obj, setting="moon")
    s = build_scene(obj)
    with pytest.raises(ConfigError):
        set_contact_mode(s.model, s, "learned")


# ----------------------------------------------------------------------------- analytic physics


@pytest.mark.parametrize("family", FAMILIES)
def test_drop_settles_on_table_and_ground(family):
    obj = make_object(family, 0)
    for setting in SETTINGS:
        s = build_scene(obj, setting=setting, object_quat="stable")
        d = s.make_data(drop_height=0.03)
        _run(s.model, d, 1.5)
        q, v = _obj_state(s, d)
        # Settled: linear speed and the surface speed of the rotation (rad/s x
        # size) under 5 mm/s, after hitting the surface at ~0.77 m/s. Rounded
        # shapes keep a residual spin / rocking with condim 3, hence not ~1e-6.
        assert np.linalg.norm(v[:3]) < 5e-3, v
        assert np.linalg.norm(v[3:]) * obj.size < 5e-3, v
        # Resting where it was put: on the surface, not through it.
        rest = s.meta["object_rest_pos"][2]
        assert abs(q[2] - rest) < 2e-3
        idx = owned_contacts(s.model, d, s)
        assert len(idx) > 0 and d.contact.dist[idx].min() > -2e-3


def test_stable_quat_puts_flattest_face_down():
    obj = make_object("box", 0, size_x=0.06, size_y=0.05, size_z=0.02)
    q = stable_quat(obj)
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, q)
    verts = np.asarray(obj.pieces[0].vertices) @ mat.reshape(3, 3).T
    assert np.ptp(verts[:, 2]) == pytest.approx(0.02, abs=1e-9)


def _reference_margin0(scene):
    """A copy of the model whose owned pairs have margin 0 and gap 0: plain MuJoCo contact."""
    ref = copy.deepcopy(scene.model)
    ref.pair_margin[scene.owned_pair_ids] = 0.0
    ref.pair_gap[scene.owned_pair_ids] = 0.0
    return ref


@pytest.mark.parametrize("family,setting,tol", [
    ("box", "ground", 0.0),  # plane colliders ignore the tolerance: bit-identical
    ("cylinder", "ground", 0.0),
    ("box", "table", 1e-6),  # convex collider: identical up to round-off at these poses
    ("cylinder", "table", 1e-6),
])
def test_analytic_mode_matches_margin0_model(family, setting, tol):
    obj = make_object(family, 0)
    s = build_scene(obj, setting=setting)
    ref = _reference_margin0(s)
    d, dref = s.make_data(drop_height=0.02), s.make_data(drop_height=0.02, model=ref)
    # A tumbling drop: sideways velocity and spin so edges and faces both hit.
    for x in (d, dref):
        x.qvel[s.object_dof_adr:s.object_dof_adr + 6] = [0.3, 0.1, 0.0, 0.0, 0.0, 2.0]
    saw_within_margin = False
    for _ in range(500):
        mujoco.mj_step(s.model, d)
        mujoco.mj_step(ref, dref)
        idx = owned_contacts(s.model, d, s)
        near = idx[(d.contact.dist[idx] > 0) & (d.contact.dist[idx] < s.owned_margin)]
        if len(near):
            saw_within_margin = True
            assert (d.contact.exclude[near] == 1).all()  # detected, no force
    assert saw_within_margin
    np.testing.assert_allclose(d.qpos, dref.qpos, rtol=0, atol=tol)
    np.testing.assert_allclose(d.qvel, dref.qvel, rtol=0, atol=max(tol, 1e-12) * 1e3)


# ----------------------------------------------------------------------------- external mode


def test_external_mode_detects_but_applies_no_force():
    obj = make_object("box", 0)
    s = build_scene(obj, setting="table", contact_mode="external")
    m = s.model
    assert set(contact_modes(m, s).values()) == {"external"}
    d = s.make_data()
    top = s.surface_z
    reported = 0
    for _ in range(200):  # 0.4 s: falls ~0.8 m without support
        mujoco.mj_step(m, d)
        idx = owned_contacts(m, d, s, role="object-table")
        reported += len(idx)
        if len(idx):
            # Detected with a full contact frame and distance, never in the solver.
            assert (d.contact.exclude[idx] == 1).all()
            assert (d.contact.efc_address[idx] == -1).all()
            assert np.allclose(np.linalg.norm(d.contact.frame[idx, :3], axis=1), 1.0)
        assert d.nefc == 0
    q, _ = _obj_state(s, d)
    assert q[2] < top - 0.1  # through the table
    assert reported > 0

    # Detection distance is owned_margin in both modes.
    for mode in ("external", "analytic"):
        set_contact_mode(m, s, mode)
        for gap, expect in ((0.003, True), (0.008, False)):
            d = s.make_data(drop_height=gap)
            idx = owned_contacts(m, d, s, role="object-table")
            assert (len(idx) > 0) == expect, (mode, gap)
            if expect:
                assert d.contact.dist[idx].min() == pytest.approx(gap + 1e-4, abs=1e-6)


def test_mode_switch_by_role():
    obj = make_object("box", 0)
    s = build_scene(obj, hand="parallel_jaw", setting="table")
    set_contact_mode(s.model, s, "external", roles=["pad-object"])
    modes = contact_modes(s.model, s)
    assert modes["own:pad_left:obj_piece0"] == "external"
    assert modes["own:table:obj_piece0"] == "analytic"
    d = s.make_data(drop_height=0.01)
    _run(s.model, d, 0.3)
    q, _ = _obj_state(s, d)
    assert q[2] > s.surface_z  # the table still holds it


# ----------------------------------------------------------------------------- hands


def _grasp_and_lift(scene, *, lift=0.1):
    """Approach, close, lift by ``lift`` m and shake (yaw); 2 s. Returns (dz, data)."""
    m, h = scene.model, scene.hand
    d = scene.make_data()
    z0 = d.qpos[scene.object_qpos_adr + 2]
    zg = scene.meta["grasp_base_z"]
    dt = m.opt.timestep

    def phase(seconds, target):
        n = int(round(seconds / dt))
        for i in range(n):
            base, grip = target((i + 1) / n)
            d.ctrl[scene.hand_actuator_ids] = hand_ctrl(h, base=base, grip=grip)
            mujoco.mj_step(m, d)

    phase(0.5, lambda s: ((0, 0, zg * s, 0), 0.0))
    phase(0.4, lambda s: ((0, 0, zg, 0), s))
    phase(0.6, lambda s: ((0, 0, zg + lift * s, 0), 1.0))
    phase(0.5, lambda s: ((0, 0, zg + lift, 0.5 * np.sin(4 * np.pi * s)), 1.0))
    return d.qpos[scene.object_qpos_adr + 2] - z0, d


def test_parallel_jaw_holds_a_lifted_box():
    obj = make_object("box", 0, size_x=0.05, size_y=0.04, size_z=0.05)
    s = build_scene(obj, hand="parallel_jaw", setting="table", grip_force=10.0)
    dz, d = _grasp_and_lift(s)
    assert dz > 0.08  # lifted with the hand (10 cm command, < 2 cm sag or slip)
    m = s.model
    assert len(owned_contacts(m, d, s, role="pad-object")) > 0
    assert len(owned_contacts(m, d, s, role="object-table")) == 0
    # Fingertip F/T: the pad normal force is the bounded grip force.
    for pad in ("left", "right"):
        f = d.sensor(f"ft_{pad}_force").data
        assert abs(f[0]) == pytest.approx(10.0, rel=0.1)


def test_three_finger_lifts_a_cylinder():
    obj = make_object("cylinder", 0)
    s = build_scene(obj, hand="three_finger", setting="table", object_quat="stable")
    dz, d = _grasp_and_lift(s)
    assert dz > 0.07
    assert len(owned_contacts(s.model, d, s, role="pad-object")) >= 3


def test_every_hand_list_is_the_one_list_of_hand_names():
    """The scenes, the rig (its grasp types and ``both``), the environments and a capture's code hands all read
    ``hand_names``; a hand added there is a hand everywhere."""
    from surrogate import hand_names
    from surrogate.envs.task import HANDS as ENV_HANDS
    from surrogate.rig.plan import HANDS as BOTH
    from surrogate.rig.plan import RIG_HANDS
    from surrogate.rig.scripts import GRASP_TYPES
    from surrogate.scenes.from_capture import CODE_HANDS

    assert HANDS == hand_names.HANDS == ("none", *hand_names.GRASPING_HANDS)
    assert ENV_HANDS == RIG_HANDS == tuple(GRASP_TYPES) == hand_names.GRASPING_HANDS
    assert BOTH == CODE_HANDS == hand_names.CODE_HANDS
    from surrogate.envs import ENV_IDS

    assert tuple(ENV_IDS.values()) == hand_names.GRASPING_HANDS  # one Gymnasium id per hand


def test_a_captures_mesh_object_is_read_from_its_recorded_file_from_any_folder(tmp_path, monkeypatch):
    """A rig capture of a user's mesh stored the path as given (relative to the folder it ran in) and never compared
    the file with its recorded sha256: from another folder the scene could not be built, and an edited mesh was
    built silently with the new shape."""
    import trimesh

    from surrogate.errors import CaptureError
    from surrogate.objects import load_mesh_object
    from surrogate.rig.simulate import nominal_object_spec
    from surrogate.scenes.from_capture import asset_from_spec

    (tmp_path / "objs").mkdir()
    trimesh.creation.box(extents=[0.04, 0.05, 0.06]).export(tmp_path / "objs" / "box.stl")
    monkeypatch.chdir(tmp_path)
    spec = nominal_object_spec(load_mesh_object("objs/box.stl", mass=0.1))
    assert spec.geometry["path"] == str(tmp_path / "objs" / "box.stl")
    monkeypatch.chdir(tmp_path / "objs")  # another folder
    assert asset_from_spec(spec).size == pytest.approx(0.06)
    trimesh.creation.box(extents=[0.08, 0.05, 0.06]).export(tmp_path / "objs" / "box.stl")  # edited after capture
    with pytest.raises(CaptureError, match="has changed since the capture was made") as e:
        asset_from_spec(spec, "rig_000003")
    assert e.value.episode == "rig_000003" and e.value.field == "object.geometry.sha256"
    relative = copy.deepcopy(spec)
    relative.geometry["path"] = "objs/box.stl"  # what earlier captures stored
    with pytest.raises(CaptureError, match="does not exist .a relative path, read from the current folder"):
        asset_from_spec(relative)
