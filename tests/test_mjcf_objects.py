"""Objects in MuJoCo's own format (``objects.mjcf``): a scanned object's folder as MuJoCo users package it, MJCF
primitives and welded bodies, what is refused, and a capture of one rebuilt from its file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import trimesh

from surrogate.errors import AssetError
from surrogate.objects import load_object_folder
from surrogate.objects.mjcf import load_mjcf_object


def _scanned(folder: Path, *, density: float = 500.0, model: str = "Shoe") -> Path:
    """A folder laid out as MuJoCo Scanned Objects are: ``model.xml``, a visual ``model.obj`` (no collision, no mass)
    and its convex decomposition ``model_collision_{0,1}.obj`` (two halves of a 10 x 4 x 3 cm block)."""
    folder.mkdir(parents=True)
    trimesh.creation.box(extents=(0.10, 0.04, 0.03)).export(folder / "model.obj")
    for i, x in enumerate((-0.025, 0.025)):
        half = trimesh.creation.box(extents=(0.05, 0.04, 0.03))
        half.apply_translation((x, 0.0, 0.0))
        half.export(folder / f"model_collision_{i}.obj")
    (folder / "model.xml").write_text(f'''<mujoco model="{model}">
  <default>
    <default class="visual"><geom group="2" type="mesh" contype="0" conaffinity="0" mass="0"/></default>
    <default class="collision"><geom group="3" type="mesh" density="{density}" friction="0.6"/></default>
  </default>
  <asset><mesh file="model.obj"/><mesh file="model_collision_0.obj"/><mesh file="model_collision_1.obj"/></asset>
  <worldbody><body name="model" pos="0.3 0 0.2" euler="0 0 30"><freejoint/><geom mesh="model" class="visual"/>
    <geom mesh="model_collision_0" class="collision"/><geom mesh="model_collision_1" class="collision"/></body>
  </worldbody>
</mujoco>''')
    return folder


def test_a_scanned_objects_folder_loads_as_one_object_with_mujocos_mass_and_collision_hulls(tmp_path):
    _scanned(tmp_path / "objects" / "Shoe_Red", model="model")
    objects, skipped = load_object_folder(tmp_path / "objects")
    assert skipped == []
    (obj,) = objects  # the visual mesh and the collision parts are the MJCF object's, not objects of their own
    assert obj.name == "Shoe_Red"  # a generic model name: the folder names it
    assert obj.mass == pytest.approx(0.10 * 0.04 * 0.03 * 500.0)  # the collision geoms' density; the visual has none
    np.testing.assert_allclose(np.sort(obj.extents), [0.03, 0.04, 0.10], atol=1e-9)  # in the body's own frame
    assert len(obj.pieces) == 2 and obj.friction == pytest.approx(0.6) and obj.params["mass_from"] == "mjcf"
    block = trimesh.creation.box(extents=(0.10, 0.04, 0.03)).moment_inertia * obj.mass / (0.10 * 0.04 * 0.03)
    np.testing.assert_allclose(np.sort(np.diag(obj.inertia)), np.sort(np.diag(block)), rtol=1e-6)


def _mjcf(path: Path, body: str) -> Path:
    path.write_text(f"<mujoco><worldbody>{body}</worldbody></mujoco>")
    return path


def test_primitives_and_welded_bodies_make_one_object_and_an_explicit_mass_is_kept(tmp_path):
    f = _mjcf(tmp_path / "hammer.xml", '<body><freejoint/><inertial pos="0 0 0" mass="0.4" diaginertia="1e-4 1e-4 1e-4"/>'
              '<geom type="cylinder" size="0.01 0.05" mass="0"/><body pos="0 0 0.06"><geom type="box" '
              'size="0.03 0.01 0.01" mass="0"/></body></body>')
    obj = load_mjcf_object(f)
    assert obj.name == "hammer" and obj.mass == pytest.approx(0.4) and len(obj.pieces) == 2
    np.testing.assert_allclose(obj.extents, [0.06, 0.02, 0.12], atol=2e-3)  # the head welded 6 cm above the handle


@pytest.mark.parametrize("body, field, words", [
    ('<body><freejoint/><geom type="box" size="0.02 0.02 0.02"/><body pos="0 0 0.05"><joint name="lid" '
     'type="hinge"/><geom type="box" size="0.02 0.02 0.005"/></body></body>', "joint[lid]", "articulated"),
    ('<body><freejoint/><geom type="box" size="0.02 0.02 0.02"/></body><body pos="0.1 0 0"><freejoint/>'
     '<geom type="box" size="0.02 0.02 0.02"/></body>', "worldbody", "one object"),
    ('<body><freejoint/><geom type="box" size="0.02 0.02 0.02" contype="0" conaffinity="0"/></body>', "geom",
     "no collision geom"),
    ('<body><freejoint/><geom type="box" size="20 30 40"/></body>', "scale", "scale"),
])
def test_what_is_not_one_rigid_object_is_refused_naming_the_element(tmp_path, body, field, words):
    with pytest.raises(AssetError, match=words) as err:
        load_mjcf_object(_mjcf(tmp_path / "thing.xml", body))
    assert err.value.location.field == field and Path(err.value.location.file) == tmp_path / "thing.xml"


def test_an_mjcf_file_mujoco_cannot_compile_is_skipped_in_a_folder_with_mujocos_reason(tmp_path):
    _scanned(tmp_path / "good")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "model.xml").write_text('<mujoco><asset><mesh file="gone.obj"/></asset><worldbody><body>'
                                               '<freejoint/><geom type="mesh" mesh="gone"/></body></worldbody></mujoco>')
    (tmp_path / "notes.xml").write_text("<notes>not MuJoCo's</notes>")  # another XML file is not an object
    objects, skipped = load_object_folder(tmp_path)
    assert [o.name for o in objects] == ["Shoe"]
    (bad,) = skipped
    assert bad[0] == tmp_path / "bad" / "model.xml" and "MuJoCo cannot compile it" in bad[1] and "gone.obj" in bad[1]


def test_a_capture_of_an_mjcf_object_rebuilds_it_from_its_file(tmp_path):
    from surrogate.objects.asset import safe_name
    from surrogate.rig.simulate import nominal_object_spec
    from surrogate.scenes.from_capture import asset_from_spec

    obj = load_mjcf_object(_scanned(tmp_path / "Shoe") / "model.xml")
    spec = nominal_object_spec(obj)
    assert spec.geometry["kind"] == "mesh" and spec.geometry["path"].endswith("model.xml")
    again = asset_from_spec(spec)
    assert again.name == safe_name(obj.name) and again.mass == pytest.approx(obj.mass)
    np.testing.assert_allclose(again.extents, obj.extents, atol=1e-12)
    np.testing.assert_allclose(again.inertia, obj.inertia, rtol=1e-12)
