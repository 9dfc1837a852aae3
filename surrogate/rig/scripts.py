"""Scripted grasp episodes for the capture rig, and their labels.

An episode: the hand starts above the object, turns to the grasp yaw and moves
over the grasp point, descends, closes with a randomized force bound, lifts,
holds, then is perturbed: a shake along a random direction, a yaw rotation, or (rig v2,
``fingertip_perturbation``) a swing across the grasp axis or an off-centre grasp bounced
vertically, both loading the pads in torsion about the axis between them.
Everything random is drawn from the script's generator in a fixed order, so a
seed fixes the episode and switching physics effects on or off never changes
the script.

Phases (s, from ``script`` config): approach, close, settle, lift, hold; the
perturbation fills the rest of the episode.

Grasp types (Feix et al. 2016, ``surrogate.capture.FEIX_GRASP_TYPES``):

* ``parallel_jaw`` -> 9 "palmar pinch": precision grasp, pad opposition of two
  single opposing pads (thumb vs index in the human version). "Prismatic 2
  finger" (8) needs two fingers side by side opposing the thumb, which the jaw
  does not have.
* ``three_finger`` -> 14 "tripod": precision grasp, pad opposition of three
  fingertip pads (thumb, index, middle) around a small object. "Sphere 3 finger"
  (28) wraps the fingers' inner surfaces around a sphere; our fingers touch with
  the tip pads only.
* ``jaco`` -> 8 "prismatic 2 finger": two fingers side by side opposing the thumb (the Kinova hand's finger 1
  against fingers 2 and 3), closing on the tip pads.

Labels (from the exact sampled trajectory, ``episode_labels``):

* ``lifted``: the object rose more than ``lift_threshold`` (2 cm) above its rest height.
* ``dropped``: lifted, then at the end it is back below the threshold or more
  than 2 cm away from every hand geom (lost).
* ``max_slip_m``: largest displacement of the object relative to a fingertip pad
  (in the pad's frame, the largest over pads) during hold and perturbation,
  from where it was at the start of the hold. ``max_slip_deg``: the same for the
  rotation relative to the hand base. ``slipped``: ``max_slip_m > slip_threshold``
  (5 mm, translational slip) or ``max_slip_deg > slip_angle_threshold`` (10 deg:
  the object pivots in the grip, the common failure of two-pad grasps); ``max_drift_m``: displacement relative to the hand base
  (includes the sideways float of force-limited fingers, which is not slip).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from surrogate.errors import SurrogateError
from surrogate.metrics import geodesic_deg
from surrogate.rig.config import script_value
from surrogate.scenes.hands import PAD_HALF, HandInfo

GRASP_TYPES = {"parallel_jaw": 9, "three_finger": 14, "jaco": 8}
_FINGER_BAND = PAD_HALF[1] + 0.004  # m, half width of the strip a descending finger sweeps
_LOST_DISTANCE = 0.02  # m


class UngraspableObject(SurrogateError, ValueError):
    """The object cannot be grasped by this hand (e.g. wider than its maximum opening)."""


def _smooth(s: float) -> float:
    """Minimum-jerk ramp 0 -> 1 on s in [0, 1] (clipped outside)."""
    s = min(max(float(s), 0.0), 1.0)
    return s * s * s * (10.0 - 15.0 * s + 6.0 * s * s)


def _fits(q: np.ndarray, yaw: float, finger_angles, limit: float) -> bool:
    """True if no point of ``q`` [n, 2] (xy from the grasp centre) lies beyond ``limit`` toward any finger."""
    for a in finger_angles:
        d = np.array([np.cos(yaw + a), np.sin(yaw + a)])
        perp = np.array([-d[1], d[0]])
        band = np.abs(q @ perp) <= _FINGER_BAND
        reach = q[band] @ d
        if reach.size and reach.max() >= limit:
            return False
    return True


def _band_width(q: np.ndarray, yaw: float) -> float:
    """Object width (m) along the jaw's closing axis, within the strip the pads sweep."""
    d = np.array([np.cos(yaw), np.sin(yaw)])
    band = np.abs(q @ np.array([-d[1], d[0]])) <= _FINGER_BAND
    along = (q[band] if band.any() else q) @ d
    return float(np.ptp(along))


def plan_grasp(hand: HandInfo, object_xy_points: np.ndarray, script: dict, rng: np.random.Generator,
               *, object_name: str = "object") -> dict:
    """Randomized grasp placement: yaw (rad) and xy offset (m) of the hand base over the object.

    Args:
      hand: the hand.
      object_xy_points: [n, 2] object surface points (vertices and samples) in world xy relative to the hand's start axis (m).
      script: the ``script`` config section.
      rng: the script's generator.
    Returns:
      {"yaw": rad, "offset": [2] m, "opening_margin": m}.
    The offset is drawn within ``grasp_offset_max``; where no yaw fits with it, it is halved, quartered and then
    zero (an object near the hand's opening is grasped centred), the draws unchanged.

    Raises:
      UngraspableObject: no yaw lets the open hand pass around the object with ``clearance``, even centred.
    """
    off = rng.uniform(-script["grasp_offset_max"], script["grasp_offset_max"], size=2)
    noise = rng.uniform(-1.0, 1.0)
    pick = rng.uniform()
    limit = 0.5 * hand.max_opening - script["clearance"]
    q = object_xy_points - off
    angles = hand.finger_angles
    span = np.pi if hand.closes_across else 2 * np.pi / len(angles)  # the yaws the hand's symmetry leaves distinct
    yaws = np.linspace(-span / 2, span / 2, 73)[:-1]
    ok = np.array([_fits(q, y, angles, limit) for y in yaws])
    drawn = off
    for shrink in (0.5, 0.25, 0.0):  # an object near the hand's opening: the operator centres the grasp
        if ok.any():
            break
        off = drawn * shrink
        q = object_xy_points - off
        ok = np.array([_fits(q, y, angles, limit) for y in yaws])
    if not ok.any():
        ext = np.ptp(object_xy_points, axis=0)
        raise UngraspableObject(
            f"object '{object_name}' ({ext[0] * 100:.1f} x {ext[1] * 100:.1f} cm in plan) does not fit the open "
            f"{hand.name} hand at any yaw: max opening {hand.max_opening * 100:.1f} cm with "
            f"{script['clearance'] * 1000:.0f} mm clearance per side")
    if hand.closes_across:
        # Close across the narrow side, as an operator would: among feasible yaws
        # within 1 cm of the narrowest grasp width.
        width = np.array([_band_width(q, y) if ok[i] else np.inf for i, y in enumerate(yaws)])
        cand = np.flatnonzero(width <= width.min() + 0.01)
    else:
        cand = np.flatnonzero(ok)
    yaw = float(yaws[cand[min(int(pick * len(cand)), len(cand) - 1)]])
    noisy = yaw + noise * script["grasp_yaw_noise"]
    if _fits(q, noisy, angles, limit):
        yaw = noisy
    return {"yaw": yaw, "offset": [float(v) for v in off]}


@dataclass
class GraspScript:
    """The command a scripted episode sends at time ``t`` (hand actuator order).

    Attributes:
      hand: the hand.
      params: the randomized parameters (JSON-able), see ``draw_script``.
      phases: phase name -> (start, end) s.
    """

    hand: HandInfo
    params: dict
    phases: dict = field(default_factory=dict)

    def __post_init__(self):
        p = self.params
        t = 0.0
        for name in ("approach", "close", "settle", "lift", "hold"):
            self.phases[name] = (t, t + p["times"][name])
            t += p["times"][name]
        self.phases["perturb"] = (t, float("inf"))
        self._dir = np.asarray(p["perturbation"].get("direction", [0.0, 0.0, 0.0]), dtype=float)
        self._open = np.asarray(self.hand.open_command, dtype=float)
        self._closed = np.asarray(self.hand.closed_command, dtype=float)

    def base_and_grip(self, t: float) -> tuple[np.ndarray, float]:
        """Base target [x, y, z, yaw] (m, rad; relative to the start pose) and grip (0 open .. 1 closed)."""
        p, ph = self.params, self.phases
        a0, a1 = ph["approach"]
        s_xy = _smooth((t - a0) / (0.4 * (a1 - a0)))
        s_z = _smooth((t - a0 - 0.25 * (a1 - a0)) / (0.75 * (a1 - a0)))
        c0, c1 = ph["close"]
        grip = float(_smooth((t - c0) / (c1 - c0)))
        l0, l1 = ph["lift"]
        if p.get("lift_speed"):  # a constant-speed lift that starts at once (``draw_lift_speed``)
            rise = min(max(t - l0, 0.0) * p["lift_speed"], p["lift_height"])
        else:  # the minimum-jerk profile over the lift phase
            rise = p["lift_height"] * _smooth((t - l0) / (l1 - l0))
        z = p["grasp_z"] * s_z + rise
        base = np.array([p["offset"][0] * s_xy, p["offset"][1] * s_xy, z, p["yaw"] * s_xy])
        q0 = ph["perturb"][0]
        if t > q0:
            pert = p["perturbation"]
            tau = t - q0
            wave = math.sin(2 * math.pi * pert["frequency"] * tau) * _smooth(tau / 0.25)
            if pert["kind"] in ("shake", "swing", "lever"):  # translations along ``direction``
                base[:3] += pert["amplitude"] * wave * self._dir
            else:
                base[3] += pert["amplitude"] * wave
        return base, grip

    def command(self, t: float) -> np.ndarray:
        """[4 + n_finger_actuators] position targets in ``hand.actuator_names`` order
        (the same as ``hand_ctrl(hand, base=base, grip=grip)``)."""
        base, grip = self.base_and_grip(t)
        out = np.empty(4 + len(self._open))
        out[:4] = base
        out[4:] = (1.0 - grip) * self._open + grip * self._closed
        return out


def draw_script_values(hand_name: str, script: dict, rng: np.random.Generator) -> dict:
    """The randomized values that do not need the scene: object yaw, grip force, lift, perturbation.

    Drawn in a fixed order from ``rng`` (the grasp placement is drawn after, by ``plan_grasp``).
    """
    obj_yaw = float(rng.uniform(-script["object_yaw_max"], script["object_yaw_max"]))
    f_lo, f_hi = (script_value(script, f"grip_force_{hand_name}_{end}") for end in ("min", "max"))
    # Log-uniform: operators command delicate and firm grasps alike (a factor of 30 between them).
    grip_force = float(np.exp(rng.uniform(np.log(f_lo), np.log(f_hi))))
    lift = float(rng.uniform(script["lift_height_min"], script["lift_height_max"]))
    height_u = float(rng.uniform(-1.0, 1.0))
    shake = bool(rng.uniform() < script["shake_probability"])
    u_amp, u_freq = rng.uniform(size=2)
    direction = rng.normal(size=3)
    direction /= np.linalg.norm(direction)
    if shake:
        pert = {"kind": "shake", "direction": [float(v) for v in direction],
                "amplitude": float(script["shake_amplitude_min"]
                                   + u_amp * (script["shake_amplitude_max"] - script["shake_amplitude_min"])),
                "frequency": float(script["shake_frequency_min"]
                                   + u_freq * (script["shake_frequency_max"] - script["shake_frequency_min"]))}
    else:
        pert = {"kind": "rotate",
                "amplitude": float(script["rotate_amplitude_min"]
                                   + u_amp * (script["rotate_amplitude_max"] - script["rotate_amplitude_min"])),
                "frequency": float(script["rotate_frequency_min"]
                                   + u_freq * (script["rotate_frequency_max"] - script["rotate_frequency_min"]))}
    times = {k: float(script[f"{k}_time"]) for k in ("approach", "close", "settle", "lift", "hold")}
    return {"object_yaw": obj_yaw, "grip_force": grip_force, "lift_height": lift, "height_u": height_u,
            "perturbation": pert, "times": times}


def draw_lift_speed(script: dict, rng: np.random.Generator) -> float | None:
    """With probability ``lift_ramp_probability``, the speed (m/s, log-uniform in ``lift_ramp_speed_min`` ..
    ``_max``) of a lift that starts at once and rises at that speed to its height, as a scripted policy's lift does
    (``policies.ScriptedGraspPolicy``); None: the minimum-jerk profile over ``lift_time``. From the episode's own ``lift``
    generator: a probability of 0 draws nothing and leaves every episode as it was."""
    prob = float(script_value(script, "lift_ramp_probability"))
    if prob <= 0.0 or rng.uniform() >= prob:
        return None
    lo, hi = (float(script_value(script, f"lift_ramp_speed_{end}")) for end in ("min", "max"))
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def fingertip_perturbation(hand: HandInfo, script: dict, rng: np.random.Generator, grasp: dict,
                           object_xy_points: np.ndarray) -> tuple[dict | None, list | None]:
    """Rig v2 perturbations: maybe replace the drawn one by a ``swing`` or a ``lever`` (see the config).

    Drawn from its own generator after the grasp is planned (a zero probability changes nothing).

    Args:
      hand: the hand.  script: the ``script`` section.  rng: the episode's ``perturbation`` generator.
      grasp: ``plan_grasp``'s result (yaw, offset).
      object_xy_points: [n, 2] as for ``plan_grasp``.
    Returns:
      (perturbation dict or None to keep the drawn one, new grasp offset [2] m or None).
    """
    u, u_amp, u_freq, u_off, u_sign = rng.uniform(size=5)
    p_swing, p_lever = script["swing_probability"], script["lever_probability"]
    if u >= p_swing + p_lever:
        return None, None
    kind = "swing" if u < p_swing else "lever"

    def span(key, x):
        return float(script[f"{kind}_{key}_min"] + x * (script[f"{kind}_{key}_max"] - script[f"{kind}_{key}_min"]))

    yaw = grasp["yaw"]
    across = np.array([-math.sin(yaw), math.cos(yaw)])  # horizontal, perpendicular to the grasp axis
    pert = {"kind": kind, "amplitude": span("amplitude", u_amp), "frequency": span("frequency", u_freq)}
    if kind == "swing":
        pert["direction"] = [float(across[0]), float(across[1]), 0.0]
        return pert, None
    pert["direction"] = [0.0, 0.0, 1.0]
    # Off the COM across the axis, at most 30 % of the object's half extent there (the pads keep hold).
    half = 0.5 * float(np.ptp((object_xy_points - np.asarray(grasp["offset"])) @ across))
    e = min(span("offset", u_off), 0.3 * half) * (1.0 if u_sign < 0.5 else -1.0)
    pert["lever_offset_m"] = float(e)
    return pert, [float(v) for v in np.asarray(grasp["offset"]) + e * across]


def episode_labels(times: np.ndarray, object_pos: np.ndarray, rel_pad: np.ndarray, rel_pos: np.ndarray,
                   rel_quat: np.ndarray, hand_object_distance: np.ndarray, phases: dict, script: dict) -> dict:
    """Outcome labels from the exact trajectory.

    Args:
      times: [N] s.
      object_pos: [N, 3] m world.
      rel_pad: [N, S, 3] m object position in each pad's frame (contact slip).
      rel_pos: [N, 3] m object position in the hand base frame.
      rel_quat: [N, 4] object orientation in the hand base frame.
      hand_object_distance: [N] m.
      phases: ``GraspScript.phases``.
      script: the ``script`` config section (thresholds).
    Returns:
      {"lifted", "dropped", "slipped": bool, "max_slip_m", "max_slip_deg", "max_drift_m", "max_rise_m",
       "final_rise_m": float,
       "slip_window_s": [start, end] (the frames the slip is measured over)}.
    """
    rise = object_pos[:, 2] - object_pos[0, 2]
    thr = script["lift_threshold"]
    lifted = bool(rise.max() > thr)
    dropped = bool(lifted and (rise[-1] < thr or hand_object_distance[-1] > _LOST_DISTANCE))
    h0 = phases["hold"][0]
    win = np.flatnonzero(times >= h0)
    if win.size == 0:  # episode ends before the hold: measure from the last frame only
        win = np.array([len(times) - 1])
    ref = win[0]
    slip = np.linalg.norm(rel_pad[win] - rel_pad[ref][None], axis=2).max(axis=1)
    drift = np.linalg.norm(rel_pos[win] - rel_pos[ref], axis=1)
    rot = geodesic_deg(rel_quat[win], rel_quat[ref][None])
    max_slip = float(slip.max()) if lifted else 0.0
    return {
        "lifted": lifted,
        "dropped": dropped,
        "slipped": bool(lifted and (max_slip > script["slip_threshold"]
                                    or rot.max() > math.degrees(script["slip_angle_threshold"]))),
        "max_slip_m": max_slip,
        "max_slip_deg": float(rot.max()) if lifted else 0.0,
        "max_drift_m": float(drift.max()) if lifted else 0.0,
        "max_rise_m": float(rise.max()),
        "final_rise_m": float(rise[-1]),
        "slip_window_s": [float(times[win[0]]), float(times[win[-1]])],
    }
