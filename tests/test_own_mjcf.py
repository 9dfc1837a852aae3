"""``surrogate.hybrid`` on a user's MJCF: what a user's model may hold and the stepper must honour or refuse (the
review of the hybrid stepper): the user's ``qfrc_applied``, RK4, gravity and mocap bodies at a switch to the learned
contact, ``roles=`` that select nothing, partly owned bodies, and ``h.model`` stepped by plain MuJoCo afterwards."""

from __future__ import annotations

import copy
import warnings

import mujoco
import numpy as np
import pytest
import torch

import surrogate
from surrogate.errors import ConfigError
from surrogate.scenes import build_scene, scene_from_model, set_contact_mode
from surrogate.scenes.collisions import dynamic_geom_pairs
from surrogate.scenes.from_model import check_ownership
from surrogate.sim import MuJoCoContact, Stepper, SurrogateWarning, ZeroContact, step

torch.set_num_threads(1)


def _xml(body: str, option: str = "", extra: str = "") -> str:
    return (f'<mujoco><option timestep="0.002" {option}/>{extra}<worldbody>'
            f'<geom name="floor" type="plane" size="1 1 .1"/>{body}</worldbody></mujoco>')


BOX = '<body name="b" pos="0 0 .03"><freejoint/><geom name="g" type="box" size=".03 .03 .03" mass=".2"/></body>'
ARM = ('<body name="arm" pos=".3 0 .2"><joint name="hinge" type="hinge" axis="0 1 0"/>'
       '<geom name="rod" type="capsule" fromto="0 0 0 .1 0 0" size=".01" mass=".1"/></body>')
PUSHER = '<body name="mc" mocap="true" pos=".1 0 .05"><geom name="pusher" type="box" size=".01 .05 .05"/>{}</body>'
USER_FORCE = np.array([2.0, 0.3, 0.0, 0.0, 0.01, 0.0, 0.05])  # N on the box (x, y), N m on it and on the hinge


def _spec(xml):
    return mujoco.MjSpec.from_string(xml)


@pytest.mark.parametrize("integrator", ["Euler", "implicitfast", "RK4"])
def test_analytic_contact_with_the_users_qfrc_applied_equals_mj_step(integrator):
    """The user writes ``qfrc_applied`` every step: ``contact="analytic"`` is ``mj_step`` on the user's model, bit for
    bit (the stepper zeroed it before)."""
    xml = _xml(BOX + ARM, f'integrator="{integrator}"')
    h = surrogate.hybrid(_spec(xml), owned=["g"], contact_model=ZeroContact(), contact="analytic")
    m = mujoco.MjModel.from_xml_string(xml)
    d, d0 = h.make_data(), mujoco.MjData(m)
    for k in range(200):
        d.qfrc_applied[:] = d0.qfrc_applied[:] = USER_FORCE * (1.0 + 0.5 * np.cos(0.05 * k))
        h.step(d)
        mujoco.mj_step(m, d0)
    assert np.array_equal(d.qpos, d0.qpos) and np.array_equal(d.qvel, d0.qvel)
    assert d0.qpos[0] > 0.01  # the push moved the box


def test_learned_contact_adds_to_the_users_qfrc_applied_which_stays():
    """Surrogate mode: the user's ``qfrc_applied``, set once, acts in every step and is what the ``MjData`` holds
    after each (MuJoCo keeps it too); the contact model's forces act beside it. Oracle (a): no force == MuJoCo with the
    owned pairs excluded, bit for bit; oracle (b): MuJoCo's own forces through the stepper == ``mj_step`` on the user's
    model (solver tolerance 0); copies as separate ``MjData``."""
    xml = _xml(BOX + ARM)
    s = scene_from_model(_spec(xml), owned=["g"])
    m = s.model
    ref = copy.deepcopy(m)
    set_contact_mode(ref, s, "external")
    d, d0 = s.make_data(), mujoco.MjData(ref)
    d.qfrc_applied[:] = d0.qfrc_applied[:] = USER_FORCE
    zero = Stepper(s, ZeroContact())
    for _ in range(100):
        step(m, d, zero)
        mujoco.mj_step(ref, d0)
        assert np.array_equal(d.qfrc_applied, USER_FORCE)
    assert np.array_equal(d.qpos, d0.qpos) and np.array_equal(d.qvel, d0.qvel)

    spec = _spec(xml)
    spec.option.tolerance = 0.0
    s = scene_from_model(spec, owned=["g"])
    user = spec.compile()
    d, d0 = s.make_data(), mujoco.MjData(user)
    d.qfrc_applied[:] = d0.qfrc_applied[:] = USER_FORCE
    oracle = Stepper(s, MuJoCoContact(s))
    for _ in range(300):  # the box slides on the floor under the push, the arm swings
        step(s.model, d, oracle)
        mujoco.mj_step(user, d0)
    assert oracle.stats()["contacts"] > 0 and d0.qpos[0] > 0.05
    assert np.abs(d.qpos - d0.qpos).max() < 1e-9

    law = surrogate.hybrid(_spec(xml), owned=["g"])
    d, batch = law.make_data(), law.copies(2)
    d.qfrc_applied[:] = USER_FORCE
    batch.qfrc_applied[:] = USER_FORCE
    for _ in range(300):
        law.step(d)
        law.step(batch)
    assert np.array_equal(d.qfrc_applied, USER_FORCE) and np.array_equal(batch.qfrc_applied[1], USER_FORCE)
    assert d.qpos[0] > 0.05  # pushed along the floor under the released law too
    assert np.abs(batch.qpos[1] - d.qpos).max() < 1e-12


def test_rk4_is_refused_for_the_learned_contact_and_allowed_for_analytic():
    """``mj_step1`` / ``mj_step2`` integrate RK4 with Euler: refused at construction and at every switch."""
    xml = _xml(BOX + ARM, 'integrator="RK4"')
    with pytest.raises(ConfigError, match="integrator RK4.*Euler, implicit or implicitfast") as e:
        surrogate.hybrid(_spec(xml), owned=["g"], contact_model=ZeroContact())
    assert e.value.location.field == "integrator"
    h = surrogate.hybrid(_spec(xml), owned=["g"], contact_model=ZeroContact(), contact="analytic")
    d = h.make_data()
    h.step(d, nstep=5)  # analytic: mj_step, RK4 as the user's model
    for call in (lambda: h.step(d, contact="surrogate"), lambda: h.step(h.copies(2), contact="surrogate"),
                 lambda: h.stepper.set_mode(h.model, "surrogate")):
        with pytest.raises(ConfigError, match="integrator RK4"):
            call()


def test_no_gravity_is_refused_at_a_switch_to_the_learned_contact_too():
    xml = _xml(BOX, 'gravity="0 0 0"')
    with pytest.raises(ConfigError, match="no gravity"):
        surrogate.hybrid(_spec(xml), owned=["g"], contact_model=ZeroContact())
    h = surrogate.hybrid(_spec(xml), owned=["g"], contact_model=ZeroContact(), contact="analytic")
    d = h.make_data()
    for call in (lambda: h.step(d, contact="surrogate"), lambda: h.step(h.copies(2), contact="surrogate"),
                 lambda: h.stepper.set_mode(h.model, "surrogate")):
        with pytest.raises(ConfigError, match="no gravity") as e:
            call()
        assert e.value.location.field == "gravity"


def test_roles_selecting_no_owned_pair_are_refused_naming_the_roles_there_are():
    """The box stands on a table box, not a plane: ``roles=("object-ground",)`` would own nothing."""
    xml = _xml(ARM + BOX).replace('name="floor" type="plane" size="1 1 .1"', 'name="table" type="box" size=".5 .5 .01" '
                                  'pos="0 0 -.01"')
    with pytest.raises(ConfigError, match=r"select none.*\['object-table', 'pad-object'\]") as e:
        surrogate.hybrid(_spec(xml), owned=["g"], contact_model=ZeroContact(), roles=("object-ground",))
    assert e.value.location.field == "roles"
    h = surrogate.hybrid(_spec(xml), owned=["g"], contact_model=ZeroContact(), roles=("object-table",))
    assert len(h.stepper.pair_ids) == 1


@pytest.mark.parametrize("child", ["", '<body name="tool" pos="-.02 0 0"><geom name="tip" size=".01"/></body>'])
def test_an_owned_pair_with_a_mocap_body_is_refused(child):
    """A mocap body's velocity is zero in ``MjData``: the learned contact would take a moving pusher for a body at
    rest. Refused (at the switch too), naming the pair and body; with its role left out of ``roles`` the pusher's
    contact is MuJoCo's and pushes the box as in the user's model."""
    xml = _xml(PUSHER.format(child) + BOX)
    with pytest.raises(ConfigError, match="owned pair 'own:(pusher|tip):g'.*'mc'.*mocap body.*roles=") as e:
        surrogate.hybrid(_spec(xml), owned=["g"], contact_model=ZeroContact())
    assert e.value.location.field == "owned"
    h = surrogate.hybrid(_spec(xml), owned=["g"], contact_model=ZeroContact(), contact="analytic")
    with pytest.raises(ConfigError, match="mocap body"):
        h.step(h.make_data(), contact="surrogate")

    spec = _spec(xml)
    spec.option.tolerance = 0.0
    s = scene_from_model(spec, owned=["g"])
    user = spec.compile()
    oracle = Stepper(s, MuJoCoContact(s), roles=("object-ground",))
    d, d0 = s.make_data(), mujoco.MjData(user)
    for _ in range(300):  # the pusher sweeps through the box's start at 0.4 m/s
        d.mocap_pos[0, 0] = d0.mocap_pos[0, 0] = 0.1 - 0.4 * d.time
        step(s.model, d, oracle)
        mujoco.mj_step(user, d0)
    assert d0.qpos[-7] < -0.1  # pushed
    assert np.abs(d.qpos - d0.qpos).max() < 1e-9


def test_a_mocap_body_in_no_owned_pair_is_stepped_as_mujoco_does():
    """A mocap pusher that pushes an unowned box: MuJoCo's own forces through the stepper == ``mj_step``."""
    other = ('<body name="o" pos="0 .3 .03"><freejoint/>'
             '<geom name="go" type="box" size=".03 .03 .03" mass=".2" contype="2" conaffinity="3"/></body>')
    pusher = ('<body name="mc" mocap="true" pos=".1 .3 .05">'
              '<geom name="pusher" type="box" size=".01 .05 .05" contype="2" conaffinity="2"/></body>')
    spec = _spec(_xml(pusher + other + BOX, extra='<contact><exclude body1="o" body2="b"/></contact>'))
    spec.option.tolerance = 0.0
    s = scene_from_model(spec, owned=["g"])
    assert set(s.pair_roles) == {"own:floor:g"}
    user = spec.compile()
    stepper = Stepper(s, MuJoCoContact(s))
    d, d0 = s.make_data(), mujoco.MjData(user)
    for _ in range(300):
        d.mocap_pos[0, 0] = d0.mocap_pos[0, 0] = 0.1 - 0.4 * d.time
        step(s.model, d, stepper)
        mujoco.mj_step(user, d0)
    assert d0.qpos[0] < -0.1 and stepper.stats()["contacts"] > 0
    assert np.abs(d.qpos - d0.qpos).max() < 1e-9


PARTIAL = ('<body name="b" pos="0 0 .05"><freejoint/><geom name="g1" type="box" size=".03 .01 .01" mass=".1"/>'
           '<geom name="g2" type="sphere" pos=".03 0 0" size=".015" mass=".1"/></body>')
FLAP = ('<body name="b" pos="0 0 .1"><freejoint/><geom name="g" type="box" size=".03 .02 .01"/>'
        '<body name="flap" pos=".03 0 0"><joint type="hinge" axis="0 1 0"/>'
        '<geom name="gf" type="box" pos=".03 0 0" size=".03 .02 .005"/></body></body>')
STACK = ('<body name="low" pos="0 0 .03"><freejoint/><geom name="gl" type="box" size=".03 .03 .03" mass=".2"/></body>'
         '<body name="top" pos="0 0 .081"><freejoint/><geom name="gt" type="box" size=".02 .02 .02" mass=".5"/></body>')


def test_a_partly_owned_body_is_refused_naming_the_geoms_to_own():
    with pytest.raises(ConfigError, match=r"\['g2'\] collide too.*owned=\['g1', 'g2'\]") as e:
        surrogate.hybrid(_spec(_xml(PARTIAL)), owned=["g1"], contact_model=ZeroContact())
    assert e.value.location.field == "owned"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        surrogate.hybrid(_spec(_xml(PARTIAL)), owned=["g1", "g2"], contact_model=ZeroContact())
        # a geom that collides with nothing (a visual one) need not be owned
        visual = PARTIAL.replace('mass=".1"/></body>', 'mass=".1" contype="0" conaffinity="0"/></body>')
        surrogate.hybrid(_spec(_xml(visual)), owned=["g1"], contact_model=ZeroContact())


@pytest.mark.parametrize("body, owned, message", [
    (FLAP, "g", r"geoms \['gf'\] of the object's own body tree \(free joint of body 'b'\)"),
    (STACK, "gt", r"can touch free-floating body 'low', whose geoms \['gl'\] keep MuJoCo's contacts"),
])
def test_analytic_contacts_on_the_owned_objects_dofs_are_warned_about(body, owned, message):
    with pytest.warns(UserWarning, match=message + ".*can creep") as record:
        surrogate.hybrid(_spec(_xml(body)), owned=[owned], contact_model=ZeroContact())
    assert len([w for w in record if "can creep" in str(w.message)]) == 1
    assert record[0].filename == __file__  # pointed at the caller of surrogate.hybrid


def test_no_ownership_warning_where_the_other_bodies_are_not_free_floating():
    """A box under a hinged arm and on a slide-jointed box (a robot's links, a table): no warning."""
    slide = ('<body name="low" pos="0 0 .03"><joint type="slide" axis="0 0 1"/>'
             '<geom name="gl" type="box" size=".03 .03 .03" mass=".2"/></body>')
    xml = _xml(slide + ARM + STACK.split("</body>", 1)[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        surrogate.hybrid(_spec(xml), owned=["gt"], contact_model=ZeroContact())


def test_the_ownership_rule_passes_the_projects_own_scenes():
    """The builder's scenes (a hand's links are not a free-floating tree; the elbow owns every link) pass the rule
    that ``surrogate.hybrid`` applies, and the Jaco scene, which ``surrogate.hybrid`` builds, is neither refused nor
    warned about."""
    from surrogate.objects import make_object

    from .conftest import SHARED, _jaco_assets_missing

    scenes = [build_scene(make_object("box", 0), hand=hand, setting="table")
              for hand in ("parallel_jaw", "three_finger", "jaco")]
    scenes.append(build_scene(make_object("box", 0), hand="none", setting="ground", timestep=1 / 148 / 4))
    urdf = SHARED / "contactnets_elbow" / "contactnets_elbow.urdf"
    if urdf.exists():
        from surrogate.objects.articulated import load_articulation

        scenes.append(build_scene(load_articulation(urdf).asset(), setting="ground", owned_margin=0.02))
    for s in scenes:
        assert check_ownership(s.model, s.object_geom_ids, dynamic_geom_pairs(s.model)) is None
    if _jaco_assets_missing() is None:
        from surrogate.bench.jaco_grasp import jaco_hybrid
        from surrogate.objects import load_split
        from surrogate.scenes.jaco import jaco_spec

        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            warnings.filterwarnings("ignore", category=SurrogateWarning)  # the checkpoint's scope
            jaco_hybrid(jaco_spec(load_split("heldout")[3]))


def test_h_model_after_a_learned_step_and_a_model_plain_mujoco_can_step():
    """After a surrogate step ``h.model``'s owned pairs apply no force (plain ``mj_step`` drops the box through the
    floor); ``stepper.set_mode(model, "analytic")`` on it or on a copy gives MuJoCo's own contact back (docs)."""
    h = surrogate.hybrid(_spec(_xml(BOX)), owned=["g"], contact_model=ZeroContact())
    d = h.make_data()
    h.step(d)
    plain = copy.deepcopy(h.model)
    h.stepper.set_mode(plain, "analytic")
    d1, d2 = copy.copy(d), copy.copy(d)
    for _ in range(300):
        mujoco.mj_step(h.model, d1)
        mujoco.mj_step(plain, d2)
    assert d1.qpos[2] < -0.1 and d2.qpos[2] == pytest.approx(0.03, abs=1e-3)
