"""Object library: procedural families, mass properties, mesh/URDF loading, splits."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from surrogate.errors import AssetError, ConfigError
from surrogate.objects import (
    DENSITY_RANGE,
    FAMILIES,
    data_root,
    load_mesh_object,
    load_object_folder,
    load_split,
    load_split_specs,
    load_urdf_object,
    make_object,
    piece_mass_properties,
    scale_to_mass,
    split_names,
    split_spec,
    validate_inertia,
)

YCB = data_root() / "ycb_sample" / "ycb"
needs_ycb = pytest.mark.skipif(
    not YCB.is_dir(), reason=f"YCB sample not found at {YCB} (set SURROGATE_DATA to the shared data folder)"
)


# --- procedural families ------------------------------------------------------


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_is_deterministic_for_a_seed(family):
    a, b = make_object(family, 5), make_object(family, 5)
    assert a.name == f"{family}_s5" and a.source == f"procedural:{family}:seed=5"
    assert a.params == b.params
    assert len(a.pieces) == len(b.pieces)
    for p, q in zip(a.pieces, b.pieces):
        np.testing.assert_array_equal(p.vertices, q.vertices)
    np.testing.assert_array_equal(a.inertia, b.inertia)
    assert make_object(family, 6).params != a.params


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_pieces_convex_centred_and_physical(family):
    for seed in range(3):
        obj = make_object(family, seed)
        for piece in obj.pieces:
            assert piece.is_watertight and piece.is_convex
        assert obj.mass > 0
        assert DENSITY_RANGE[0] <= obj.params["density"] <= DENSITY_RANGE[1]
        # graspable: 3-8 cm characteristic size (capsules/dumbbells a little longer)
        assert 0.02 <= obj.size <= 0.12, obj.extents
        props = piece_mass_properties(obj.pieces, obj.params["density"])
        np.testing.assert_allclose(props.com, 0.0, atol=1e-6)
        np.testing.assert_allclose(props.mass, obj.mass, rtol=1e-9)
        validate_inertia(obj.inertia)
        assert obj.friction == 0.8


@pytest.mark.parametrize("family", [f for f in sorted(FAMILIES) if f not in ("lshape", "dumbbell")])
def test_single_piece_inertia_matches_trimesh(family):
    obj = make_object(family, 1)
    (piece,) = obj.pieces
    ref = piece.copy()
    ref.density = obj.params["density"]
    np.testing.assert_allclose(obj.mass, ref.mass, rtol=1e-9)
    np.testing.assert_allclose(obj.inertia, ref.moment_inertia, rtol=1e-9, atol=1e-12 * np.abs(obj.inertia).max())


def test_box_inertia_matches_analytic_formula():
    a, b, c, rho = 0.04, 0.06, 0.08, 1000.0
    obj = make_object("box", 0, size_x=a, size_y=b, size_z=c, density=rho)
    m = rho * a * b * c
    assert obj.mass == pytest.approx(m, rel=1e-12)
    expected = np.diag([m * (b * b + c * c), m * (a * a + c * c), m * (a * a + b * b)]) / 12
    np.testing.assert_allclose(obj.inertia, expected, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("family", ["lshape", "dumbbell"])
def test_multi_piece_inertia_matches_mujoco(family):
    """MuJoCo sums the inertia of a body's mesh geoms: an independent oracle for touching pieces."""
    mujoco = pytest.importorskip("mujoco")
    obj = make_object(family, 3)
    spec = mujoco.MjSpec()
    body = spec.worldbody.add_body(name="obj")
    body.add_freejoint()
    for i, p in enumerate(obj.pieces):
        spec.add_mesh(name=f"m{i}", uservert=p.vertices.ravel().tolist(), userface=p.faces.ravel().tolist())
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_MESH, meshname=f"m{i}", density=obj.params["density"])
    model = spec.compile()
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, model.body_iquat[1])
    rot = rot.reshape(3, 3)
    inertia = rot @ np.diag(model.body_inertia[1]) @ rot.T
    assert model.body_mass[1] == pytest.approx(obj.mass, rel=1e-6)
    np.testing.assert_allclose(model.body_ipos[1], 0.0, atol=1e-8)
    np.testing.assert_allclose(inertia, obj.inertia, atol=1e-6 * np.abs(obj.inertia).max())


def test_overrides_keep_other_parameters_and_get_own_name():
    base = make_object("cylinder", 2)
    fixed = make_object("cylinder", 2, radius=0.03)
    assert fixed.params["radius"] == 0.03
    assert fixed.params["height"] == base.params["height"]
    assert fixed.params["density"] == base.params["density"]
    assert fixed.name != base.name and fixed.name.startswith("cylinder_s2_")
    assert make_object("cylinder", 2, name="my_can").name == "my_can"


def test_unknown_family_and_bad_overrides_raise_config_errors():
    with pytest.raises(ConfigError, match=r"unknown family 'teapot'.*allowed.*'box'"):
        make_object("teapot", 0)
    with pytest.raises(ConfigError, match=r"size_q.*allowed.*size_x") as err:
        make_object("box", 0, size_q=0.05)
    assert err.value.location.field == "size_q"
    with pytest.raises(ConfigError, match="radius.*positive") as err:
        make_object("sphere", 0, radius=-0.01)
    assert err.value.location.field == "radius"
    with pytest.raises(ConfigError, match="width") as err:
        make_object("lshape", 0, width=0.07)
    assert err.value.location.field == "width"
    with pytest.raises(ConfigError, match="seed"):
        make_object("box", -1)


# --- mass properties ----------------------------------------------------------


def _box(lo, hi):
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    return trimesh.creation.box(extents=hi - lo, transform=trimesh.transformations.translation_matrix((lo + hi) / 2))


def test_overlapping_pieces_are_counted_once():
    # two 2 cm cubes overlapping by 1 cm along x: the union is a 3 x 2 x 2 cm box
    pieces = [_box([0, 0, 0], [0.02, 0.02, 0.02]), _box([0.01, 0, 0], [0.03, 0.02, 0.02])]
    props = piece_mass_properties(pieces, 1000.0)
    union = _box([0, 0, 0], [0.03, 0.02, 0.02])
    union.density = 1000.0
    assert props.volume == pytest.approx(union.volume, rel=1e-3)
    np.testing.assert_allclose(props.com, union.center_mass, atol=1e-5)
    np.testing.assert_allclose(props.inertia, union.moment_inertia, rtol=1e-2, atol=1e-2 * union.moment_inertia.max())
    # without the correction the shared cube is counted twice
    assert piece_mass_properties(pieces, 1000.0, overlap_grid=None).volume == pytest.approx(2 * 0.02**3)


def test_scale_to_mass_and_inertia_validation():
    inertia = np.diag([1.0, 2.0, 2.5])
    np.testing.assert_allclose(scale_to_mass(inertia, 2.0, 0.5), inertia / 4)
    for bad, what in [
        (np.array([[1.0, 0.1, 0], [0, 1, 0], [0, 0, 1]]), "symmetric"),
        (np.diag([1.0, -1.0, 1.0]), "positive definite"),
        (np.diag([1.0, 1.0, 3.0]), "triangle"),
        (np.diag([np.nan, 1.0, 1.0]), "non-finite"),
    ]:
        with pytest.raises(AssetError, match=what) as err:
            validate_inertia(bad, file="x.urdf", field="inertial.inertia")
        assert "x.urdf" in str(err.value) and "inertial.inertia" in str(err.value)
    validate_inertia(np.diag([1.0, 1.0, 2.0]))  # a thin disc sits exactly on the bound
    with pytest.raises(AssetError, match="mass"):
        scale_to_mass(inertia, 1.0, 0.0)


# --- mesh files ---------------------------------------------------------------


def test_decomposition_file_is_split_into_its_hulls(tmp_path):
    # two boxes sharing a face (as VHACD hulls do on a cutting plane); splitting
    # by edge connectivity (trimesh's mesh.split) turns this into 4 fragments
    a, b = _box([0, 0, 0], [0.02, 0.02, 0.02]), _box([0.02, 0, 0], [0.04, 0.02, 0.02])
    path = tmp_path / "two_hulls.stl"
    trimesh.util.concatenate([a, b]).export(path)
    obj = load_mesh_object(path, density=500.0)
    assert len(obj.pieces) == 2
    assert all(p.is_convex for p in obj.pieces)
    assert obj.mass == pytest.approx(500.0 * 2 * 0.02**3, rel=1e-6)  # STL stores float32
    assert obj.name == "two_hulls" and obj.family == "mesh"
    with pytest.warns(UserWarning, match="convex hull"):  # the whole file is not one closed surface
        single = load_mesh_object(path, mass=0.1, split_pieces=False)
    assert len(single.pieces) == 1 and single.mass == pytest.approx(0.1)
    np.testing.assert_allclose(single.inertia, obj.inertia * 0.1 / obj.mass, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("suffix", [".obj", ".stl", ".ply"])
def test_mesh_formats_load_alike(tmp_path, suffix):
    path = tmp_path / f"block{suffix}"
    _box([0, 0, 0], [0.03, 0.04, 0.05]).export(path)
    obj = load_mesh_object(path, density=800.0)
    assert obj.name == "block" and len(obj.pieces) == 1
    assert obj.mass == pytest.approx(800.0 * 0.03 * 0.04 * 0.05, rel=1e-6)


def test_pieces_without_volume_are_refused(tmp_path):
    # two flat squares 5 cm apart: the file has extent, but no piece has a volume
    path = tmp_path / "sheets.obj"
    path.write_text(
        "v 0 0 0\nv 0.05 0 0\nv 0.05 0.05 0\nv 0 0.05 0\n"
        "v 0 0 0.05\nv 0.05 0 0.05\nv 0.05 0.05 0.05\nv 0 0.05 0.05\n"
        "f 1 2 3\nf 1 3 4\nf 5 6 7\nf 5 7 8\n"
    )
    with pytest.raises(AssetError, match="none of the 2 pieces has a volume") as err:
        load_mesh_object(path)
    assert err.value.location.field == "pieces" and str(path) in str(err.value)


def test_non_convex_mesh_is_hulled_with_a_warning(tmp_path):
    path = tmp_path / "ring.obj"
    trimesh.creation.torus(major_radius=0.03, minor_radius=0.008).export(path)
    with pytest.warns(UserWarning, match="convex hull"):
        obj = load_mesh_object(path)
    assert len(obj.pieces) == 1 and obj.pieces[0].is_convex


def test_mesh_origin_and_scale_are_applied(tmp_path):
    path = tmp_path / "cube_mm.stl"
    _box([0, 0, 0], [20.0, 30.0, 40.0]).export(path)  # millimetres
    obj = load_mesh_object(path, scale=0.001, origin_xyz=(0.1, 0.0, 0.0), origin_rpy=(0.0, 0.0, np.pi / 2))
    np.testing.assert_allclose(np.sort(obj.extents), [0.02, 0.03, 0.04], atol=1e-12)
    np.testing.assert_allclose(obj.extents[:2], [0.03, 0.02], atol=1e-12)  # yaw 90 deg swaps x and y
    np.testing.assert_allclose(obj.params["com_in_source_frame"], [0.1 - 0.015, 0.01, 0.02], atol=1e-12)


@pytest.mark.parametrize(
    "case, field, message",
    [
        ("truncated_stl", "mesh", "truncated"),
        ("empty_obj", "faces", "no faces"),
        ("nan_vertex", "vertices", "NaN"),
        ("millimetres", "scale", "scale=0.001"),
        ("flat", "extents", "thinner than 2 mm"),
        ("missing", "path", "does not exist"),
        ("format", "format", "unsupported"),
        ("corrupt_glb", "mesh", "unreadable or corrupt"),
    ],
)
def test_bad_mesh_files_name_file_and_field(tmp_path, case, field, message):
    box = _box([0, 0, 0], [0.05, 0.05, 0.05])
    if case == "truncated_stl":
        path = tmp_path / "cut.stl"
        box.export(path)
        path.write_bytes(path.read_bytes()[:300])
    elif case == "empty_obj":
        path = tmp_path / "empty.obj"
        path.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\n")
    elif case == "nan_vertex":
        path = tmp_path / "nan.obj"
        path.write_text("v 0 0 0\nv 0.05 0 0\nv 0 nan 0\nv 0 0 0.05\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n")
    elif case == "millimetres":
        path = tmp_path / "mm.stl"
        _box([0, 0, 0], [50.0, 50.0, 50.0]).export(path)
    elif case == "flat":
        path = tmp_path / "card.stl"
        _box([0, 0, 0], [0.05, 0.08, 0.0005]).export(path)
    elif case == "missing":
        path = tmp_path / "nowhere.stl"
    elif case == "corrupt_glb":
        path = tmp_path / "box.glb"
        path.write_bytes(b"glTF")
    else:
        path = tmp_path / "box.dae"
        path.write_text("<COLLADA/>")
    with pytest.raises(AssetError, match=message) as err:
        load_mesh_object(path)
    assert err.value.location.field == field
    assert str(path) in str(err.value)


def _urdf(path, mesh, mass="0.1", scale="1 1 1"):
    path.write_text(
        f"""<robot name="thing"><link name="base_link">
        <collision><origin xyz="0 0 0.01" rpy="0 0 0"/>
        <geometry><mesh filename="{mesh}" scale="{scale}"/></geometry></collision>
        <inertial><mass value="{mass}"/><inertia ixx="1e-3" ixy="0" ixz="0" iyy="1e-3" iyz="0" izz="1e-3"/></inertial>
        </link></robot>"""
    )
    return path


def test_urdf_errors_name_the_urdf_and_element(tmp_path):
    _box([0, 0, 0], [0.05, 0.05, 0.05]).export(tmp_path / "box.stl")
    with pytest.raises(AssetError, match="not found") as err:
        load_urdf_object(_urdf(tmp_path / "a.urdf", "package://pkg/nothing.stl"))
    assert err.value.location.field == "collision[0].geometry.mesh.filename" and "a.urdf" in str(err.value)
    with pytest.raises(AssetError, match="scale=") as err:
        load_urdf_object(_urdf(tmp_path / "b.urdf", "box.stl", scale="100 100 100"))
    assert err.value.location.field == "collision[0].geometry.mesh.scale"
    with pytest.raises(AssetError) as err:
        load_urdf_object(_urdf(tmp_path / "c.urdf", "box.stl", mass="-1"))
    assert err.value.location.field == "inertial.mass"
    (tmp_path / "d.urdf").write_text("<robot><link")
    with pytest.raises(AssetError) as err:
        load_urdf_object(tmp_path / "d.urdf")
    assert err.value.location.field == "xml"
    # package:// resolves relative to the URDF folder with the package name dropped
    obj = load_urdf_object(_urdf(tmp_path / "e.urdf", "package://pkg/box.stl"))
    assert obj.name == "thing" and obj.mass == pytest.approx(0.1)


def test_folder_skips_bad_files_with_reasons(tmp_path):
    _box([0, 0, 0], [0.05, 0.05, 0.05]).export(tmp_path / "box.stl")
    _box([0, 0, 0], [0.03, 0.03, 0.03]).export(tmp_path / "cube.stl")
    _urdf(tmp_path / "thing.urdf", "cube.stl", mass="0.2")  # cube.stl is referenced: not loaded on its own
    (tmp_path / "cut.stl").write_bytes((tmp_path / "box.stl").read_bytes()[:200])
    _urdf(tmp_path / "broken.urdf", "missing.stl")
    # a GLB scene of two bodies (metres, as glTF is) is one object of two hulls, each where its node puts it
    trimesh.Scene([_box([0, 0, 0], [0.04, 0.04, 0.04]), _box([0.05, 0, 0], [0.07, 0.02, 0.06])]).export(tmp_path / "pair.glb")
    (tmp_path / "cad.dae").write_text("<COLLADA/>")  # a 3D format it does not read: named, not ignored
    objects, skipped = load_object_folder(tmp_path)
    assert sorted(o.name for o in objects) == ["box", "pair", "thing"]
    pair = next(o for o in objects if o.name == "pair")
    assert len(pair.pieces) == 2 and pair.size == pytest.approx(0.07) and pair.mass == pytest.approx(1000 * 8.8e-5)
    assert sorted(p.name for p, _ in skipped) == ["broken.urdf", "cad.dae", "cut.stl"]
    assert all(reason for _, reason in skipped)
    assert "unsupported mesh format '.dae'" in dict((p.name, r) for p, r in skipped)["cad.dae"]


# --- YCB sample ---------------------------------------------------------------


@needs_ycb
def test_ycb_urdfs_load_with_urdf_masses_and_real_inertia():
    objects, skipped = load_object_folder(YCB)
    assert skipped == []
    by_name = {o.name: o for o in objects}
    assert set(by_name) == {"banana", "cracker_box", "mug", "rubiks_cube", "tomato_soup_can", "wood_block"}
    assert by_name["mug"].mass == pytest.approx(0.118)
    for obj in objects:
        assert len(obj.pieces) > 10, obj.name  # VHACD decompositions, not one hull
        assert all(p.is_convex for p in obj.pieces)
        validate_inertia(obj.inertia)
        assert not np.allclose(obj.inertia, 1e-3 * np.eye(3))  # the URDF placeholder is ignored
        assert 0.03 < obj.size < 0.25
        np.testing.assert_allclose(piece_mass_properties(obj.pieces).com, 0.0, atol=1e-6)


@needs_ycb
def test_ycb_collision_origin_is_applied():
    urdf = YCB / "mug.urdf"
    mesh = YCB / "025_mug" / "google_16k" / "textured_vhacd.stl"
    offset = np.array([0.018858606464151616, -0.01657296231165061, -0.026898852026976835])  # from mug.urdf
    raw = load_mesh_object(mesh, mass=0.118)
    placed = load_urdf_object(urdf)
    np.testing.assert_allclose(
        placed.params["com_in_source_frame"], np.add(raw.params["com_in_source_frame"], offset), atol=1e-9
    )
    np.testing.assert_allclose(placed.inertia, raw.inertia, rtol=1e-6, atol=1e-12)


@needs_ycb
def test_ycb_split_loads_from_surrogate_data(monkeypatch):
    monkeypatch.setenv("SURROGATE_DATA", str(YCB.parent.parent))
    assert len(load_split("ycb")) == 6


# --- splits -------------------------------------------------------------------


def test_a_procedural_splits_count_is_what_load_split_makes():
    """``SplitSpec.procedural_count`` (the main job counts the splits it does not use instead of building them)."""
    for name in ("train", "val", "heldout"):
        assert split_spec(name).procedural_count == len(load_split(name)), name
    assert split_spec("train_1k").procedural_count == 1002
    assert split_spec("ycb").procedural_count is None  # a folder split: counted by loading it


def test_default_splits_are_disjoint_by_family():
    names = split_names()
    assert {"train", "heldout"} <= set(names)
    train, heldout = split_spec("train"), split_spec("heldout")
    assert not set(train.families) & set(heldout.families)
    train_objs, heldout_objs = load_split("train"), load_split("heldout")
    assert len(train_objs) == len(train.families) * (train.seeds[1] - train.seeds[0])
    assert not {o.family for o in train_objs} & {o.family for o in heldout_objs}
    wide = load_split("train_wide")  # one object per grasp: other seeds of the training families, none held out
    assert {o.family for o in wide} == set(train.families) and len(wide) == 240
    all_names = [o.name for o in train_objs + heldout_objs + load_split("val") + wide]
    assert len(all_names) == len(set(all_names))
    thousand = load_split("train_1k")  # the object-count study: train_wide's objects and 762 more, none held out
    assert len(thousand) == 1002 and {o.family for o in thousand} == set(train.families)
    assert {o.name for o in wide} <= {o.name for o in thousand}
    assert not {o.name for o in thousand} & {o.name for o in train_objs + heldout_objs + load_split("val")}


@pytest.mark.parametrize(
    "text, key, message",
    [
        ("splits: {a: {families: [teapot], seeds: [0, 2]}}", "splits.a.families", "allowed"),
        ("splits: {a: {families: [box], seeds: [3, 1]}}", "splits.a.seeds", "half-open"),
        ("splits: {a: {families: [box], seeds: [0, 2], colour: red}}", "splits.a.colour", "allowed"),
        ("splits: {a: {families: [box], seeds: [0, 2]}, b: {families: [box], seeds: [5, 6]}}\n"
         "disjoint_families: [[a, b]]", "disjoint_families", "box"),
        ("splits: {a: {folder: '${NO_SUCH_VAR_FOR_TEST}/x'}}", "splits.a.folder", "NO_SUCH_VAR_FOR_TEST"),
        ("splitz: {}", "splits", "splits"),
    ],
)
def test_bad_split_configs_name_the_key(tmp_path, text, key, message):
    path = tmp_path / "splits.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as err:
        load_split_specs(path)
    assert err.value.location.field == key
    assert str(path) in str(err.value)


def test_unknown_split_lists_the_names(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown split 'nope'.*train"):
        load_split("nope")
    path = tmp_path / "s.yaml"
    path.write_text("splits: {gone: {folder: does_not_exist}}")
    with pytest.raises(ConfigError, match="does not exist") as err:
        load_split("gone", path)
    assert err.value.location.field == "splits.gone.folder"
