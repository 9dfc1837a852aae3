"""``surrogate.hybrid`` on an MJCF the scene builder did not write (issue #26): the stepper's oracles there, copies,
the released law, analytic contact equal to plain ``mj_step``, and bad ``owned`` refused."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

import surrogate
from surrogate.errors import ConfigError
from surrogate.scenes import scene_from_model
from surrogate.scenes.collisions import dynamic_geom_pairs
from surrogate.sim import MuJoCoContact, Stepper, ZeroContact, step

from .conftest import trajectory

torch.set_num_threads(1)
# the box touches the free capsule, whose floor contact stays MuJoCo's, and the capsule's hinged tag keeps its own:
# warned about (``scenes.from_model.check_ownership``, ``tests/test_own_mjcf.py``); these tests do not step that
pytestmark = [pytest.mark.filterwarnings("ignore:the owned geoms can touch free-floating body 'capsule'"),
              pytest.mark.filterwarnings(r"ignore:geoms \['tag_geom'\] of the object's own body tree")]

# A free box and a capsule (with a hinged tag: its parent filter) on a plane, a geom that collides with nothing of
# theirs (bitmask), and a hinged paddle that sweeps into both after ~90 degrees. The box-floor contact is the model's
# own (unnamed) pair.
XML = """<mujoco model="paddle_world">
  <option timestep="0.002" integrator="implicitfast"/>
  <worldbody>
    <light pos="0 0 3" dir="0 0 -1" directional="true"/>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <geom name="ghost" type="box" size="0.05 0.05 0.05" pos="0 0.5 0.05" contype="2" conaffinity="2"/>
    <body name="box" pos="0.15 0 0.0251">
      <freejoint/>
      <geom name="box_geom" type="box" size="0.03 0.02 0.025" mass="0.2"/>
    </body>
    <body name="capsule" pos="-0.15 0 0.0201" euler="90 0 0">
      <freejoint/>
      <geom name="cap_geom" type="capsule" size="0.02 0.04" mass="0.1"/>
      <body name="tag" pos="0 0.03 0">
        <joint name="tag_hinge" type="hinge" axis="0 0 1" damping="0.001"/>
        <geom name="tag_geom" type="sphere" size="0.01" mass="0.005"/>
      </body>
    </body>
    <body name="arm" pos="0 0 0.03">
      <joint name="hinge" type="hinge" axis="0 0 1" damping="0.05"/>
      <geom name="paddle" type="box" size="0.01 0.2 0.015" mass="0.3"/>
    </body>
  </worldbody>
  <contact><pair geom1="box_geom" geom2="floor"/></contact>
  <actuator><velocity name="spin" joint="hinge" kv="0.5"/></actuator>
  <keyframe><key name="raised" qpos="0.15 0 0.1 1 0 0 0  -0.15 0 0.0201 0.7071068 0.7071068 0 0  0 0"/></keyframe>
</mujoco>"""


def _spec(xml=XML):
    return mujoco.MjSpec.from_string(xml)


def _ctrl(k):
    """The paddle's speed command (rad/s): still for 0.1 s, then 3 rad/s (the box is hit at ~0.6 s)."""
    return 3.0 if k * 0.002 > 0.1 else 0.0


def _run(m, ds, n, stepper=None, *, contact=None):
    """[n, B, nq + nv] trajectory of the paddle sweep (plain ``mj_step`` without a stepper)."""
    def control(k, d):
        d.ctrl[:] = _ctrl(k)

    return trajectory(m, ds, n, stepper, contact=contact, control=control)


def test_owned_pairs_are_every_contact_mujoco_would_test_with_the_owned_geom():
    s = scene_from_model(_spec(), owned=["box_geom"])
    m = s.model
    pairs = {(m.geom(int(a)).name, m.geom(int(b)).name) for a, b in zip(m.pair_geom1[s.owned_pair_ids],
                                                                         m.pair_geom2[s.owned_pair_ids])}
    assert {frozenset(p) for p in pairs} == {frozenset(p) for p in
                                             [("box_geom", "floor"), ("box_geom", "cap_geom"), ("box_geom", "tag_geom"),
                                              ("box_geom", "paddle")]}
    assert s.owned_pairs[0] == "_pair0"  # the model's own pair, named, owned as it is
    assert s.pair_roles == {"_pair0": "object-ground", "own:cap_geom:box_geom": "pad-object",
                            "own:tag_geom:box_geom": "pad-object", "own:paddle:box_geom": "pad-object"}
    assert not [p for p in dynamic_geom_pairs(m) if m.geom("box_geom").id in p]  # default collisions excluded
    assert s.obj.size == pytest.approx(0.06) and s.obj.mass == pytest.approx(0.2)
    cap = scene_from_model(_spec(), owned=["cap_geom"])
    names = {n.split(":")[1] for n in cap.owned_pairs}
    assert names == {"floor", "box_geom", "paddle"}  # not the tag (its child: parent filter), not the ghost (bitmask)


def test_zero_force_equals_the_owned_contacts_excluded():
    """Oracle (a), against the user's own model with the owned geom's collisions removed."""
    s = scene_from_model(_spec(), owned=["box_geom"])
    hyb = _run(s.model, [mujoco.MjData(s.model)], 600, Stepper(s, ZeroContact()))
    ref_spec = _spec()
    ref_spec.geom("box_geom").contype = ref_spec.geom("box_geom").conaffinity = 0
    ref_spec.delete(ref_spec.pairs[0])
    ref_m = ref_spec.compile()
    ref = _run(ref_m, [mujoco.MjData(ref_m)], 600)
    assert np.array_equal(hyb, ref)
    assert ref[-1, 0, 2] < -0.05  # the box fell through the floor


def test_mujoco_contact_reproduces_mj_step_and_analytic_equals_the_users_model():
    """Oracle (b): MuJoCo's own forces through the stepper reproduce ``mj_step`` on the user's model over 2 s in which
    the paddle hits the box and the capsule; ``contact="analytic"`` is that ``mj_step`` exactly.

    Measured: box position within 4.6e-14 m (all qpos 5.5e-13) at the default tolerance, 1.7e-16 m at tolerance 0."""
    user = _spec().compile()
    for tol, atol in ((1e-8, 1e-6), (0.0, 1e-12)):
        user.opt.tolerance = tol
        ref = _run(user, [mujoco.MjData(user)], 1000)
        s = scene_from_model(_spec(), owned=["box_geom"])
        s.model.opt.tolerance = tol
        hyb = _run(s.model, [mujoco.MjData(s.model)], 1000, Stepper(s, MuJoCoContact(s)))
        assert np.abs(hyb - ref)[:, 0, :14].max() < atol, (tol, np.abs(hyb - ref)[:, 0, :14].max())
        ana = _run(s.model, [mujoco.MjData(s.model)], 1000, Stepper(s, ZeroContact(), contact="analytic"))
        assert np.array_equal(ana, ref)
    assert np.abs(ref[-1, 0, :2] - [0.15, 0.0]).max() > 0.02  # the paddle moved the box


def test_hybrid_entry_point_released_law_settles_a_dropped_box_and_copies_equal_separate_data():
    h = surrogate.hybrid(_spec(), owned=["box_geom"])
    model, stepper = h
    assert model is h.scene.model and stepper.contact == "surrogate" and stepper.law_model
    ds = [h.make_data() for _ in range(2)]
    ds[1].qpos[2] += 0.05  # dropped from 5 cm
    cp = h.copies(2)
    for i, d in enumerate(ds):
        cp.set_state(i, d)
    for _ in range(400):  # 0.8 s, the paddle still
        h.step(ds)
        h.step(cp)
    box = np.array([d.qpos[:7] for d in ds])
    assert np.abs(np.array([d.qvel[:6] for d in ds])).max() < 1e-2  # settled
    assert np.abs(box[:, 2] - 0.025).max() < 5e-4 and np.abs(box[:, :2] - [0.15, 0]).max() < 1e-3
    # the box (the law's forces) agrees to 1e-12; the analytic capsule resting on its side to MuJoCo's rounding over
    # one MjData of the copies (9e-12 in its orientation here; the two separate MjData differ from each other by 2e-12)
    np.testing.assert_allclose(cp.qpos[:, :7], box, rtol=0, atol=1e-12)
    np.testing.assert_allclose(cp.qpos, [d.qpos for d in ds], rtol=0, atol=1e-9)
    st = stepper.stats()
    assert st["contacts"] > 0 and st["fallbacks"] == 0 and st["mujoco_resets"] == 0


def test_the_model_can_be_a_path_or_the_last_mjmodel_loaded(tmp_path):
    path = tmp_path / "world.xml"
    path.write_text(XML)
    user = mujoco.MjModel.from_xml_path(str(path))
    user.geom_friction[user.geom("paddle").id, 0] = 0.3  # a runtime edit: mj_saveLastXML keeps it
    h = surrogate.hybrid(user, owned=["box_geom"], contact_model=ZeroContact())
    assert h.model.geom_friction[h.model.geom("paddle").id, 0] == 0.3
    assert (h.model.nq, h.model.nv, h.model.nu) == (user.nq, user.nv, user.nu)
    assert h.make_data(key="raised").qpos[2] == 0.1 and h.make_data().qpos[2] == 0.0251
    assert surrogate.hybrid(path, owned=["box_geom"], contact_model=ZeroContact()).model.npair == 4
    mujoco.MjModel.from_xml_string("<mujoco><worldbody/></mujoco>")  # now the last one loaded
    with pytest.raises(ConfigError, match="last model loaded from XML"):
        surrogate.hybrid(user, owned=["box_geom"], contact_model=ZeroContact())
    with pytest.raises(ConfigError, match="1 pairs; the stepper's scene has .* 4: .*surrogate.hybrid returned"):
        step(user, mujoco.MjData(user), h.stepper)  # the user's own model: the stepper's pairs are not in it
    # learned contact in a world without gravity: refused when built (its units are the object's weight), where every
    # contact had failed the force guard at its first step
    weightless = mujoco.MjSpec.from_string(XML.replace('<option timestep', '<option gravity="0 0 0" timestep'))
    with pytest.raises(ConfigError, match="no gravity: .*units of the object's weight"):
        surrogate.hybrid(weightless, owned=["box_geom"], contact_model=ZeroContact())
    surrogate.hybrid(weightless, owned=["box_geom"], contact="analytic")  # MuJoCo's own contact needs no weight


@pytest.mark.parametrize("owned, message", [
    (["nope"], r"no geom named \['nope'\]"),
    (["box"], r"\['box'\] are bodies: name their geoms"),
    (["box_geom", "cap_geom"], "one free body.*'box_geom' on body 'box', 'cap_geom' on body 'capsule'"),
    (["paddle"], "'paddle' on body 'arm'.*no free joint"),
    (["tag_geom"], "'tag_geom' on body 'tag'.*no free joint"),
    ([], "at least one geom"),
])
def test_bad_owned_is_refused_with_one_clear_message(owned, message):
    with pytest.raises(ConfigError, match=message):
        surrogate.hybrid(_spec(), owned=owned, contact_model=ZeroContact())


def test_owned_contacts_with_a_margin_are_refused():
    xml = XML.replace('mass="0.2"/>', 'mass="0.2" margin="0.01"/>')
    with pytest.raises(ConfigError, match="margin 0.*own:cap_geom:box_geom"):
        surrogate.hybrid(_spec(xml), owned=["box_geom"], contact_model=ZeroContact())


@pytest.mark.parametrize("geom", [
    'type="box" size="0.03 0.02 0.025"', 'type="sphere" size="0.02"', 'type="capsule" size="0.02 0.04"',
    'type="cylinder" size="0.02 0.04"', 'type="ellipsoid" size="0.03 0.02 0.01"', 'type="mesh" mesh="brick"',
])
def test_the_owned_body_as_an_object_asset_has_the_geoms_size(geom):
    """The law's unit of length is the owned body's largest bounding-box side, whatever the geom type."""
    xml = f"""<mujoco><asset><mesh name="brick" vertex="0 0 0  .05 0 0  0 .03 0  .05 .03 0  0 0 .02  .05 0 .02
      0 .03 .02  .05 .03 .02"/></asset><worldbody><geom name="floor" type="plane" size="1 1 .1"/>
      <body name="obj" pos="0 0 .1"><freejoint/><geom name="g" {geom} mass="0.1"/></body></worldbody></mujoco>"""
    s = scene_from_model(_spec(xml), owned=["g"])
    g = s.model.geom("g").id
    assert s.obj.size == pytest.approx(2 * s.model.geom_aabb[g, 3:].max(), rel=1e-6)
    assert s.obj.mass == pytest.approx(0.1) and s.pair_roles == {"own:floor:g": "object-ground"}
    np.testing.assert_allclose(s.obj.combined_mesh().bounds.mean(axis=0), 0, atol=1e-9)  # about the COM
