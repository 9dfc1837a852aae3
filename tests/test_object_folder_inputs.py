"""A folder of downloaded objects as users bring them: malformed URDFs among good ones, primitives in millimetres,
upper-case suffixes, ROS ``package://`` layouts, objects whose names come out the same, symlinked sub-folders; and
``surrogate jaco --objects FOLDER``."""

from __future__ import annotations

import argparse
import os
import warnings

import pytest
import trimesh

from surrogate.errors import AssetError
from surrogate.objects import load_object_folder, load_urdf_object


def _urdf(path, geometry: str, *, name: str = "thing", mass: str = "0.2", extra: str = ""):
    """A one-link URDF at ``path`` with one collision ``geometry`` (the element's XML text)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'<robot name="{name}"><link name="base"><inertial><mass value="{mass}"/></inertial>'
                    f"<collision><geometry>{geometry}</geometry></collision></link>{extra}</robot>")
    return path


def _box_stl(path, extents=(0.04, 0.05, 0.06)):
    path.parent.mkdir(parents=True, exist_ok=True)
    trimesh.creation.box(extents=extents).export(path)
    return path


def _load(folder, **kw):
    """``load_object_folder`` with every warning recorded: (objects, skipped, RuntimeWarnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        objects, skipped = load_object_folder(folder, **kw)
    return objects, skipped, [w for w in caught if issubclass(w.category, RuntimeWarning)]


# --- 1. one malformed URDF does not abort the folder ---------------------------------------------------------------

_JOINT = ('<link name="b"><inertial><mass value="0.1"/></inertial><collision><geometry><box size="0.02 0.02 0.02"/>'
          '</geometry></collision></link><joint name="j" type="revolute"><parent link="base"/><child link="b"/>'
          '<axis xyz="0 0 1"/><limit lower="${-pi/2}" upper="${pi/2}" effort="1" velocity="1"/></joint>')


@pytest.mark.parametrize("geometry, extra, field, words", [
    ('<cylinder radius="0.02"/>', "", "collision[0].geometry.cylinder.length", "missing"),
    ("<box/>", "", "collision[0].geometry.box.size", "missing"),
    ("<sphere/>", "", "collision[0].geometry.sphere.radius", "missing"),
    ('<sphere radius="0"/>', "", "collision[0].geometry.sphere.radius", "positive"),
    ('<box size="-0.05 0.04 0.03"/>', "", "collision[0].geometry.box.size", "positive"),
    ('<cylinder radius="wide" length="0.1"/>', "", "collision[0].geometry.cylinder.radius", "number"),
    ('<box size="0.04 0.04 0.04"/>', _JOINT, "joint[j].limit.lower", "xacro"),
])
def test_a_malformed_urdf_is_skipped_naming_its_field_and_the_others_load(tmp_path, geometry, extra, field, words):
    bad = _urdf(tmp_path / "a_bad.urdf", geometry, extra=extra)
    _urdf(tmp_path / "b_good.urdf", '<box size="0.04 0.04 0.04"/>', name="good")
    with pytest.raises(AssetError) as err:
        load_urdf_object(bad)
    assert err.value.location.field == field and words in err.value.reason
    objects, skipped, runtime = _load(tmp_path)
    assert [o.name for o in objects] == ["good"]
    assert [p for p, _ in skipped] == [bad] and field in skipped[0][1] and str(bad) in skipped[0][1]
    assert runtime == []


def test_a_file_that_fails_for_any_reason_is_skipped_not_fatal(tmp_path, monkeypatch):
    """Not only ``AssetError``: a reader's own exception (trimesh, numpy) skips the file, named, with the reason."""
    import surrogate.objects.folder as folder_mod

    _box_stl(tmp_path / "a.stl")
    _box_stl(tmp_path / "b.stl")
    real = folder_mod.load_mesh_object

    def flaky(path, **kw):
        if path.name == "a.stl":
            raise IndexError("tuple index out of range")
        return real(path, **kw)

    monkeypatch.setattr(folder_mod, "load_mesh_object", flaky)
    objects, skipped, _ = _load(tmp_path)
    assert [o.name for o in objects] == ["b"]
    assert [p.name for p, _ in skipped] == ["a.stl"] and skipped[0][1] == "IndexError: tuple index out of range"

    def buggy(path, **kw):  # an error of this package, not of the file: not hidden as a skipped file
        raise TypeError("unexpected keyword")

    monkeypatch.setattr(folder_mod, "load_mesh_object", buggy)
    with pytest.raises(TypeError):
        load_object_folder(tmp_path)


# --- 2. primitives get the unit check meshes get ----------------------------------------------------------------


def test_a_primitive_in_millimetres_is_refused_with_the_scale_hint_as_a_mesh_is(tmp_path):
    _urdf(tmp_path / "box_mm.urdf", '<box size="50 40 30"/>', name="box_mm")
    _urdf(tmp_path / "box_ok.urdf", '<box size="0.05 0.04 0.03"/>', name="box_ok")
    _box_stl(tmp_path / "mesh_mm.stl", (50, 40, 30))
    objects, skipped, _ = _load(tmp_path)
    assert [o.name for o in objects] == ["box_ok"]
    reasons = {p.name: r for p, r in skipped}
    assert set(reasons) == {"box_mm.urdf", "mesh_mm.stl"}
    for r in reasons.values():
        assert "the file is in millimetres" in r and "scale=0.001" in r
    assert "collision[0].geometry.box.size" in reasons["box_mm.urdf"]


# --- 3. suffixes are case-insensitive ----------------------------------------------------------------------------


def test_an_upper_case_urdf_suffix_is_read_as_a_urdf(tmp_path):
    _box_stl(tmp_path / "meshes" / "ball.stl")
    _urdf(tmp_path / "BALL.URDF", '<mesh filename="meshes/ball.stl"/>', name="ball_urdf", mass="0.3")
    objects, skipped, _ = _load(tmp_path)
    assert skipped == []
    assert [(o.name, o.mass) for o in objects] == [("ball_urdf", pytest.approx(0.3))]  # its mesh not loaded loose


# --- 4. package:// in the ROS layout -----------------------------------------------------------------------------


def test_package_paths_resolve_in_the_ros_layout(tmp_path):
    ws = tmp_path / "ws"
    _box_stl(ws / "my_pkg" / "meshes" / "bottle.stl")
    _urdf(ws / "my_pkg" / "urdf" / "bottle.urdf", '<mesh filename="package://my_pkg/meshes/bottle.stl"/>',
          name="bottle", mass="0.9")
    # a package whose folder has another name (a git checkout): found by its package.xml
    (ws / "cup-main").mkdir()
    (ws / "cup-main" / "package.xml").write_text('<?xml version="1.0"?><package format="2"><name>cup_pkg</name>'
                                                 "</package>")
    _box_stl(ws / "cup-main" / "meshes" / "cup.stl", (0.03, 0.03, 0.05))
    _urdf(ws / "cup-main" / "urdf" / "deep" / "cup.urdf", '<mesh filename="package://cup_pkg/meshes/cup.stl"/>',
          name="cup", mass="0.1")
    objects, skipped, _ = _load(ws)
    assert skipped == []
    assert sorted((o.name, o.mass) for o in objects) == [("bottle", pytest.approx(0.9)), ("cup", pytest.approx(0.1))]
    # what worked before still does: the package name dropped, relative to the URDF; under mesh_root
    _box_stl(tmp_path / "flat" / "box.stl")
    assert load_urdf_object(_urdf(tmp_path / "flat" / "e.urdf", '<mesh filename="package://pkg/box.stl"/>')).mass == 0.2
    _box_stl(tmp_path / "root" / "pkg" / "m.stl")
    urdf = _urdf(tmp_path / "elsewhere" / "f.urdf", '<mesh filename="package://pkg/m.stl"/>')
    assert load_urdf_object(urdf, mesh_root=tmp_path / "root").mass == 0.2


# --- 5. names that come out the same -----------------------------------------------------------------------------


def test_objects_whose_names_coincide_all_load_with_distinct_stable_names(tmp_path):
    _box_stl(tmp_path / "a" / "deep" / "cup.stl", (0.03, 0.03, 0.05))
    _box_stl(tmp_path / "b" / "cup.stl", (0.04, 0.04, 0.06))
    _box_stl(tmp_path / "杯子.stl", (0.05, 0.05, 0.05))
    _box_stl(tmp_path / "碗.stl", (0.06, 0.06, 0.03))
    for i, size in enumerate((0.04, 0.05, 0.06)):
        _urdf(tmp_path / f"obj{i}.urdf", f'<box size="{size} {size} {size}"/>', name="object")
    objects, skipped, _ = _load(tmp_path)
    assert skipped == [] and len(objects) == 7
    names = [o.name for o in objects]
    assert len(set(names)) == 7 and "cup" in names and "object" in names
    by_source = {os.path.relpath(o.source, tmp_path): o.name for o in objects}
    assert by_source["a/deep/cup.stl"] == "cup" and by_source["obj0.urdf"] == "object"  # the first keeps its name
    again, _ = load_object_folder(tmp_path)
    assert [o.name for o in again] == names  # deterministic
    _box_stl(tmp_path / "c" / "cup.stl")  # another copy does not rename the ones there before
    third = {os.path.relpath(o.source, tmp_path): o.name for o in load_object_folder(tmp_path)[0]}
    assert all(third[k] == v for k, v in by_source.items()) and len(set(third.values())) == 8


# --- 6. symlinked sub-folders ------------------------------------------------------------------------------------


def test_symlinked_sub_folders_are_scanned_once_and_loops_end(tmp_path):
    store, folder = tmp_path / "store", tmp_path / "folder"
    _box_stl(store / "linked_box.stl")
    _box_stl(folder / "plain.stl", (0.03, 0.03, 0.03))
    (folder / "linked_dir").symlink_to(store, target_is_directory=True)
    (store / "loop").symlink_to(folder, target_is_directory=True)  # folder -> store -> folder -> ...
    (folder / "again").symlink_to(store, target_is_directory=True)  # the same files reached twice
    objects, skipped, _ = _load(folder)
    assert skipped == []
    assert sorted(o.name for o in objects) == ["linked_box", "plain"]  # each file once, whichever way it is reached


# --- 7. surrogate jaco --objects FOLDER ----------------------------------------------------------------------------


def test_jaco_takes_a_folder_of_objects_as_rig_generate_does(tmp_path, monkeypatch, capsys):
    import surrogate.bench.jaco_grasp as jg
    import surrogate.scenes.jaco as scenes_jaco

    _box_stl(tmp_path / "objs" / "brick.stl")
    seen = []

    def compare(objects, **kw):
        seen.extend(objects)
        return [{"object": o.name} for o in objects]

    monkeypatch.setattr(scenes_jaco, "jaco_assets", lambda assets=None: tmp_path)
    monkeypatch.setattr(jg, "compare", compare)
    args = argparse.Namespace(objects=str(tmp_path / "objs"), count=8, checkpoint=None, assets=None, video=None,
                              json=True)
    assert jg.run(args) == [{"object": "brick"}]
    assert [o.name for o in seen] == ["brick"] and '"object": "brick"' in capsys.readouterr().out


def test_a_path_that_is_no_folder_is_named_as_a_path_not_as_an_unknown_split(tmp_path):
    from surrogate.errors import ConfigError
    from surrogate.rig.generate import load_objects

    _box_stl(tmp_path / "brick.stl")
    with pytest.raises(ConfigError, match="is no folder that exists"):
        load_objects(str(tmp_path / "typo"))
    with pytest.raises(ConfigError, match="is a file: objects are a folder"):
        load_objects(str(tmp_path / "brick.stl"))
    assert [o.name for o in load_objects(str(tmp_path))[0]] == ["brick"]


def test_a_folders_content_key_follows_its_symlinked_sub_folders(tmp_path):
    """The rig suites cache a folder's captures by ``folder_sha256``: an object edited behind a linked sub-folder, as
    the loader reads it, makes another key (``dataset_hash``'s walk does not follow links: its key had not moved)."""
    from surrogate.objects.folder import folder_sha256

    _box_stl(tmp_path / "real" / "mug" / "mug.stl")
    (tmp_path / "objs").mkdir()
    os.symlink(tmp_path / "real" / "mug", tmp_path / "objs" / "mug")
    before = folder_sha256(tmp_path / "objs")
    assert before == folder_sha256(tmp_path / "objs")
    _box_stl(tmp_path / "real" / "mug" / "mug.stl", extents=(0.05, 0.05, 0.05))
    assert folder_sha256(tmp_path / "objs") != before
