"""The transfer suite's videos: the policy tuned under the learned contact, deployed from the same reset in the hybrid
simulator and on the capture rig (the stand-in for hardware), for the held-out objects of median and largest
|success gap| (sim minus rig). The rollouts are the suite's own (``transfer.sim_rollout`` / ``rig_rollout``, copy 0
of the deployment's seed), run again for the two objects: the ledger holds rates, not trajectories."""

from __future__ import annotations

import numpy as np

from .policy import load_suite_objects
from .transfer import deploy_seed, rig_rollout, sim_rollout
from .video_clips import Clip, Panel, outcome_note
from .video_select import median_and_worst, resolve_checkpoint


def transfer_picks(ledger: dict, source: str = "surrogate") -> list[tuple[str, str, float]]:
    """(which, object, success gap sim - rig) of ``source``'s held-out objects of median and largest |gap| (the median
    of an even count is the lower middle); [] without that row or its per-object rates."""
    row = next((r for r in ledger.get("transfer") or [] if r.get("source") == source), None)
    po = (row or {}).get("per_object") or {}
    return median_and_worst({k: v["sim"]["success_rate"] - v["rig"]["success_rate"] for k, v in po.items()
                             if v["sim"]["success_rate"] is not None and v["rig"]["success_rate"] is not None})


def transfer_clips(ledger: dict, checkpoint=None):
    """(which, ``Clip``) of ``transfer_picks``: two panels, the hybrid simulator and the rig, of the same copy."""
    from ..model.checkpoint import load_checkpoint
    from ..rig.config import load_rig_config

    cfg = ledger["config"]
    d = cfg["data"]
    row = next(r for r in ledger["transfer"] if r["source"] == "surrogate")
    model = load_checkpoint(resolve_checkpoint(checkpoint or ledger["models"]["surrogate"]["checkpoint"]))[0]
    rig_cfg = load_rig_config(cfg["rig"].get("config"), cfg["rig"].get("overrides") or ())
    objs = {o.name: o for o in load_suite_objects(d["objects"])}
    seed = deploy_seed(d)
    for which, name, gap in transfer_picks(ledger):
        res, tape, _ = sim_rollout(objs[name], row["tuned"], "surrogate", d=d, poses=1, seed=seed, model=model,
                                   tape=True)
        rig_res, rig_tape, _, venv = rig_rollout(objs[name], row["tuned"], d=d, rig_cfg=rig_cfg, poses=1, seed=seed)
        venv.close()
        panels = [Panel("sim: hybrid (learned contact)", "surrogate", np.stack([q[0] for q in tape]),
                        note=outcome_note(res)),
                  Panel("rig (stand-in for hardware)", "recorded", np.stack([q[0] for q in rig_tape]),
                        note=outcome_note(rig_res))]
        F = min(len(p.qpos) for p in panels)
        for p in panels:
            p.qpos = p.qpos[:F]
        task = tape.task
        clip = Clip(task.model, task.scene.object_qpos_adr, float(max(task.scene.obj.extents)),
                    np.arange(F) * task.control_dt, panels,
                    f"{name} ({which} sim-rig success gap {gap:+.2f}): tuned grip {row['tuned']['grip_force']:g} N, "
                    f"close {row['tuned']['close_time']:g} s, lift {row['tuned']['lift_speed']:g} m/s")
        clip.info.update({"which": which, "episode": f"{name}/0", "success_gap": gap, "tuned": row["tuned"]})
        yield which, clip
