"""URDFs whose links are joined by fixed joints: welded into one rigid object, or into one link of an articulation."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from surrogate.errors import AssetError
from surrogate.objects.articulated import load_articulation
from surrogate.objects.meshes import origin_matrix
from surrogate.objects.urdf import load_urdf_object


def link(name: str, *, mass: float | None = None, box=None, xyz="0 0 0", rpy="0 0 0") -> str:
    inertial = "" if mass is None else f'<inertial><mass value="{mass}"/></inertial>'
    col = "" if box is None else (f'<collision><origin xyz="{xyz}" rpy="{rpy}"/><geometry><box size="{box}"/>'
                                  "</geometry></collision>")
    return f'<link name="{name}">{inertial}{col}</link>'


def joint(name: str, kind: str, parent: str, child: str, *, xyz="0 0 0", rpy="0 0 0", axis="0 0 1") -> str:
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="{axis}"/></joint>')


def urdf(tmp_path, name: str, *parts: str):
    path = tmp_path / f"{name}.urdf"
    path.write_text(f'<robot name="{name}">{"".join(parts)}</robot>')
    return path


def test_links_welded_by_fixed_joints_are_the_rigid_object_their_shapes_make(tmp_path):
    welded = urdf(tmp_path, "welded", link("a", mass=0.3, box="0.1 0.04 0.04"),
                  link("b", mass=0.2, box="0.06 0.04 0.04", xyz="0.01 0 0"), link("marker"),
                  joint("ab", "fixed", "a", "b", xyz="0.05 0.03 0", rpy="0 0 1.5707963"),
                  joint("bm", "fixed", "b", "marker", xyz="0 0 0.1"))
    # the same shapes written in one link: b's box at a's frame by hand (origin of the joint, then of the box)
    m = origin_matrix((0.05, 0.03, 0), (0, 0, 1.5707963)) @ origin_matrix((0.01, 0, 0), (0, 0, 0))
    rpy = " ".join(f"{x:.9f}" for x in Rotation.from_matrix(m[:3, :3]).as_euler("xyz"))
    one = urdf(tmp_path, "one", '<link name="a"><inertial><mass value="0.5"/></inertial>'
               '<collision><geometry><box size="0.1 0.04 0.04"/></geometry></collision>'
               f'<collision><origin xyz="{m[0, 3]:.9f} {m[1, 3]:.9f} {m[2, 3]:.9f}" rpy="{rpy}"/>'
               '<geometry><box size="0.06 0.04 0.04"/></geometry></collision></link>')
    w, o = load_urdf_object(welded), load_urdf_object(one)
    assert w.mass == pytest.approx(0.5) and len(w.pieces) == 2
    np.testing.assert_allclose(w.inertia, o.inertia, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(np.concatenate([p.vertices for p in w.pieces]),
                               np.concatenate([p.vertices for p in o.pieces]), atol=1e-7)  # both about their centre
    lo, hi = np.min([p.bounds[0] for p in w.pieces], axis=0), np.max([p.bounds[1] for p in w.pieces], axis=0)
    # b turned by 90 deg about z, centred at (0.05, 0.04): x to 0.07 (its 0.04 m side), y from 0.01 to 0.07 (its
    # 0.06 m side); a from (-0.05, -0.02)
    np.testing.assert_allclose(hi - lo, [0.12, 0.09, 0.04], atol=1e-6)


def test_a_rigid_object_with_a_movable_joint_is_refused_by_name(tmp_path):
    hinged = urdf(tmp_path, "hinged", link("a", mass=0.3, box="0.1 0.04 0.04"),
                  link("b", mass=0.2, box="0.1 0.04 0.04"), joint("hinge", "revolute", "a", "b", xyz="0.1 0 0"))
    with pytest.raises(AssetError, match="load_articulation") as e:
        load_urdf_object(hinged)
    assert e.value.location.field == "joint[hinge].type"
    massless = urdf(tmp_path, "massless", link("a", box="0.1 0.04 0.04"), link("b", box="0.1 0.04 0.04"),
                    joint("ab", "fixed", "a", "b"))
    with pytest.raises(AssetError, match="no link welded into 'a' has an <inertial><mass>"):
        load_urdf_object(massless)


def test_an_articulation_welds_fixed_links_and_keeps_its_kinematics(tmp_path):
    path = urdf(tmp_path, "arm", link("base", mass=0.4, box="0.1 0.1 0.02"),
                link("mount", mass=0.1, box="0.02 0.02 0.05"),
                link("tip", mass=0.2, box="0.08 0.02 0.02", xyz="0.04 0 0"), link("tip_marker"),
                joint("weld", "fixed", "base", "mount", xyz="0.03 -0.02 0.035", rpy="0.3 0 0.5"),
                joint("hinge", "revolute", "mount", "tip", xyz="0 0 0.03", rpy="0 0.2 0", axis="0 1 0"),
                joint("marker", "fixed", "tip", "tip_marker", xyz="0.08 0 0"))
    art = load_articulation(path)
    assert [lk.name for lk in art.links] == ["base", "tip"] and art.joint_names == ["hinge"]
    assert art.joints[0].parent == "base" and art.links[0].mass == pytest.approx(0.5)
    assert len(art.links[0].pieces) == 2 and len(art.links[1].pieces) == 1
    base = np.array([[0.1, -0.2, 0.3, *Rotation.from_rotvec([0.1, 0.4, -0.2]).as_quat(scalar_first=True)]])
    q = np.array([[0.7]])
    got = art.link_poses(base, q)[0, 1]
    # by hand: base pose, then the weld's origin, the hinge's origin, the hinge's turn
    world = np.eye(4)
    world[:3, :3] = Rotation.from_quat(base[0, 3:], scalar_first=True).as_matrix()
    world[:3, 3] = base[0, :3]
    turn = np.eye(4)
    turn[:3, :3] = Rotation.from_rotvec([0, 0.7, 0]).as_matrix()
    want = world @ origin_matrix((0.03, -0.02, 0.035), (0.3, 0, 0.5)) @ origin_matrix((0, 0, 0.03), (0, 0.2, 0)) @ turn
    np.testing.assert_allclose(got[:3], want[:3, 3], atol=1e-9)
    got_r = Rotation.from_quat(got[3:], scalar_first=True).as_matrix()
    np.testing.assert_allclose(got_r, want[:3, :3], atol=1e-9)
    # MuJoCo builds it as the welded links say: the base body holds the mount's piece, the tip hangs on the hinge
    from surrogate.scenes import build_scene

    s = build_scene(art.asset(), setting="ground", timestep=0.002)
    assert s.model.nq == 8 and s.model.njnt == 2 and len(s.object_geom_ids) == 3


def test_a_folder_of_objects_takes_a_welded_urdf_and_names_a_hinged_one(tmp_path):
    from surrogate.objects.folder import load_object_folder
    from surrogate.scenes import build_scene

    urdf(tmp_path, "mug", link("body", mass=0.3, box="0.08 0.08 0.1"), link("handle", mass=0.05, box="0.02 0.01 0.06"),
         joint("weld", "fixed", "body", "handle", xyz="0.05 0 0"))
    urdf(tmp_path, "scissors", link("a", mass=0.1, box="0.1 0.02 0.01"), link("b", mass=0.1, box="0.1 0.02 0.01"),
         joint("pivot", "continuous", "a", "b", xyz="0 0 0.01"))
    objects, skipped = load_object_folder(tmp_path)
    assert [o.name for o in objects] == ["mug"] and objects[0].mass == pytest.approx(0.35)
    assert len(skipped) == 1 and skipped[0][0].name == "scissors.urdf" and "joint[pivot].type" in skipped[0][1]
    s = build_scene(objects[0], setting="ground", timestep=0.002)
    d = s.make_data(drop_height=0.05)
    for _ in range(1000):
        mujoco.mj_step(s.model, d)
    assert abs(d.qvel).max() < 1e-3 and d.qpos[2] == pytest.approx(0.05, abs=0.01)  # settled on its 0.1 m side
