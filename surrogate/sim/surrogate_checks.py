"""What the hybrid stepper refuses to step with the learned contact (``contact="surrogate"``): checked when a
``Stepper`` is built for it, and again whenever a call (``step(..., contact="surrogate")``) or ``set_mode`` switches a
stepper to it, so that a stepper built analytic cannot step what one built for the learned contact would refuse.

- no gravity: the law's inputs and its force guard (``max_force``) are in units of the object's weight, m |g|;
- the RK4 integrator: the step is split in ``mj_step1`` / ``mj_step2`` to put the contact forces in between, and
  MuJoCo integrates that split with Euler for RK4 (measured: a pendulum swinging 0.3 s in free flight, no contact,
  ended 0.05 rad from ``mj_step``'s); analytic contact (one ``mj_step``) stays RK4;
- an owned pair with a mocap body (or a body welded to one): MuJoCo moves a mocap body by its pose alone, so its
  velocity is zero in ``MjData`` (``cvel``) and the law would take a moving pusher for a body at rest (measured: a
  pusher at 0.4 m/s passed through the box). ``copies_model`` refuses every mocap body; the separate ``MjData`` step
  the ones in no owned pair (they move other bodies as MuJoCo does).

And, whatever the mode, ``roles=`` that select none of the scene's owned pairs (the learned contact would own
nothing and every step would be MuJoCo's).
"""

from __future__ import annotations

import mujoco
import numpy as np

from ..errors import ConfigError

_RK4 = int(mujoco.mjtIntegrator.mjINT_RK4)


def model_problem(m: mujoco.MjModel) -> ConfigError | None:
    """The model options a surrogate step cannot take (gravity, integrator), as the error to raise, or None."""
    opt = m.opt
    g = opt.gravity
    if not float(g @ g) > 0:
        return ConfigError("the scene has no gravity: the learned contact's inputs and its force guard (max_force) "
                           "are in units of the object's weight, m |g|, which is then zero; give the model gravity",
                           key="gravity")
    if opt.integrator == _RK4:
        return ConfigError("integrator RK4 with contact='surrogate': the learned contact's step is MuJoCo's mj_step1 / "
                           "mj_step2, which MuJoCo integrates with Euler for RK4 (the model would silently step with "
                           "another integrator); use integrator Euler, implicit or implicitfast (<option "
                           "integrator=\"implicitfast\"/>), or contact='analytic'", key="integrator")
    return None


def mocap_partner(m: mujoco.MjModel, pair_ids: np.ndarray, roles: dict[str, str]) -> ConfigError | None:
    """The error for the first of the owned pairs ``pair_ids`` with a geom on a mocap body (or a body welded to one),
    or None. ``roles``: {pair name: role} (``Scene.pair_roles``), for the advice."""
    for p in np.asarray(pair_ids, dtype=int):
        for g in (int(m.pair_geom1[p]), int(m.pair_geom2[p])):
            b = int(m.geom_bodyid[g])
            mocap = int(m.body_weldid[b])
            if m.body_mocapid[mocap] < 0:
                continue
            name = m.pair(int(p)).name
            role = roles.get(name, "?")
            others = tuple(sorted(set(roles.values()) - {role}))
            welded = "" if mocap == b else f", welded to mocap body {m.body(mocap).name!r}"
            return ConfigError(
                f"owned pair {name!r}: geom {m.geom(g).name!r} is on body {m.body(b).name!r}{welded}, a mocap body. "
                "MuJoCo moves a mocap body by its pose alone: its velocity in MjData is zero, so the learned contact "
                "would take it for a body at rest (a moving pusher passes through the object). Keep that contact "
                f"analytic: a stepper without its role {role!r} (roles={others!r}) steps it with MuJoCo's own "
                "contact; or move that body with joints and actuators (or a weld equality to the mocap body) instead",
                key="owned")
    return None


def check_roles(scene, roles, pair_ids: np.ndarray) -> None:
    """Refuse ``roles`` (given by the user) that select none of the scene's owned pairs, naming the roles they have."""
    if len(pair_ids) or not len(scene.owned_pairs):
        return
    have = sorted({scene.pair_roles[n] for n in scene.owned_pairs})
    raise ConfigError(f"roles={tuple(roles)!r} select none of the scene's owned pairs, whose roles are {have}: the "
                      "learned contact would own nothing (every step MuJoCo's own contact); choose among those roles",
                      key="roles")
