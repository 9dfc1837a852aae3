"""Does a release hold a resting object against a sideways push? Its friction at rest, read in the stepper.

    python eval/push_creep.py --checkpoint checkpoints/cube_tosses [--loads 0.05 0.1] [--seconds 5]

A box (``make_object("box", 0)``) rests on the ground in its stable pose; after 0.5 s of settling a constant
horizontal force of ``--loads`` times its weight acts at its centre of mass (``xfrc_applied``) for ``--seconds``.
Printed per load: how far it moves and its speed at the end, under the checkpoint's contact and under analytic
MuJoCo, on the same model. Coulomb friction of coefficient mu holds a load below mu; a law whose friction rises with
the slip speed (``prior.static_friction`` < 1) holds only its friction at rest. Writes nothing.
"""

from __future__ import annotations

import argparse

import mujoco

from surrogate.model.checkpoint import load_checkpoint
from surrogate.objects import make_object
from surrogate.scenes import build_scene
from surrogate.sim import Stepper, step


def pushed(scene, stepper, load: float, seconds: float, contact: str) -> tuple[float, float]:
    """(distance moved along the push, m; speed at the end, m/s) of the object under ``load`` x its weight."""
    m, ob = scene.model, scene.object_body_id
    d = scene.make_data()
    mujoco.mj_forward(m, d)
    per_second = round(1.0 / m.opt.timestep)
    step(m, d, stepper, nstep=per_second // 2, contact=contact)  # settle
    d.xfrc_applied[ob, 0] = load * m.body_subtreemass[ob] * abs(m.opt.gravity[2])
    x0 = float(d.xipos[ob][0])
    step(m, d, stepper, nstep=int(seconds * per_second), contact=contact)
    return float(d.xipos[ob][0]) - x0, abs(float(d.cvel[ob][3]))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", default="checkpoints/cube_tosses")
    ap.add_argument("--loads", type=float, nargs="+", default=[0.05, 0.1], help="sideways force / the object's weight")
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args(argv)
    model = load_checkpoint(args.checkpoint)[0]
    scene = build_scene(make_object("box", 0), hand="none", setting="ground", object_quat="stable")
    stepper = Stepper(scene, model, contact="surrogate", on_bad_force="fallback")
    print(f"{args.checkpoint}: a box of {scene.model.body_subtreemass[scene.object_body_id]:.3f} kg pushed sideways "
          f"for {args.seconds:g} s")
    for load in args.loads:
        for contact in ("analytic", "surrogate"):
            x, v = pushed(scene, stepper, load, args.seconds, contact)
            print(f"  load {load:.2f} x weight, {contact:9s}: moved {x * 1e3:8.1f} mm, at {v * 1e3:7.2f} mm/s")


if __name__ == "__main__":
    main()
