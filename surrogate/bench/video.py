"""Side-by-side videos of benchmark episodes and environment rollouts (``surrogate render``).

A *clip* is one MuJoCo scene shown once per trajectory, side by side: the recording, analytic
MuJoCo and the surrogate for a benchmark episode; analytic and surrogate for a closed-loop
environment rollout (there is no recording). Each panel is labelled with its model, the time and
its pose error against the recording at that frame (``evaluate.episode_errors``: the one pose error under
the suites' one blow-up rule, so its "episode mean" is the ledger's figure); the object's trace, the path of its centre of mass so far, is drawn into the renderer's
scene as capsules (``mjv_initGeom`` / ``mjv_connector``): the panel's own path in its colour and,
in the model panels, the recorded path in white for reference.

Trajectories come from the suites' own rollout functions, never a second implementation
(``video_clips``): ``cube_real.predict_analytic`` and ``predictors.surrogate_predict`` for
free-object episodes (tosses), ``replay.simulate_replay_qpos`` and ``replay.replay_with_model`` for
grasps (``rig-grasp``), ``policies.rollout`` for environment rollouts. The episode is named, or picked
as the ``median`` or ``worst`` of a ledger's per-episode position errors (the figure the suite
scored with ``pose_errors``: the surrogate's, or the identified baseline's when no surrogate was
evaluated; for ``rig-grasp`` among the acceptance sets' episodes; ``video_select``).

Rendering is headless (``mujoco.Renderer``; set ``MUJOCO_GL=egl`` before MuJoCo is imported on a
machine without a display; the ``surrogate`` command does so itself). MP4 goes through imageio
with its ffmpeg (dependencies of the package); GIF and PNG need only Pillow. Every output is written
atomically with the user's umask (``video_render``).

This module makes the suites' videos and re-exports the parts (``surrogate.bench.video`` is the
public path of all of them).

Shapes: F = recorded frames, N = video frames, P = panels, H x W = one panel's pixels.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError, SurrogateError
from .video_clips import Clip, Panel, benchmark_clip, env_clip
from .video_render import (
    HEADER_PX,
    PANEL_RGBA,
    REFERENCE_RGBA,
    RenderError,
    render_clip,
    render_to_files,
    rendering_unavailable,
    still_index,
    write_still,
    write_video,
)
from .video_select import (
    WHICH,
    load_ledger,
    pick_episode,
    policy_picks,
    ranked_episodes,
    ranking_model,
    resolve_checkpoint,
    suite_episode_key,
    suite_ledger,
)

__all__ = [
    "Clip", "HEADER_PX", "PANEL_RGBA", "Panel", "REFERENCE_RGBA", "RenderError", "WHICH", "benchmark_clip", "env_clip",
    "load_ledger", "pick_episode", "policy_picks", "ranked_episodes", "ranking_model", "render_clip", "render_to_files",
    "rendering_unavailable", "resolve_checkpoint", "still_index", "suite_episode_key", "suite_ledger", "suite_videos",
    "write_still", "write_video",
]


def _clips_of(ledger: dict, checkpoint):
    """(which, clip) of the suite's median and worst test episode (policy: object)."""
    if ledger.get("suite") == "policy":
        from ..envs import ENV_IDS
        from .policy import load_suite_objects

        d = (ledger.get("config") or {})["data"]
        env_id = {h: e for e, h in ENV_IDS.items()}[d.get("hand", "parallel_jaw")]
        objs = {o.name: o for o in load_suite_objects(d["objects"])}
        ckpt = checkpoint or (ledger["models"].get("surrogate") or {}).get("checkpoint")
        for which, name, gap in policy_picks(ledger):
            clip = env_clip(env_id, checkpoint=ckpt, object=objs[name], seed=int(d.get("seed", 0)),
                            duration=float(d.get("duration", 3.0)))
            clip.title = f"{ledger.get('suite_name') or 'policy'}: {name} ({which} success-rate gap {gap:+.2f}), copy 0"
            clip.info.update({"which": which, "episode": f"{name}/0", "success_rate_gap": gap})
            yield which, clip
        return
    if ledger.get("suite") == "transfer":
        from .transfer_video import transfer_clips

        yield from transfer_clips(ledger, checkpoint)
        return
    for which in WHICH:
        yield which, benchmark_clip(ledger, which=which, checkpoint=checkpoint)


def suite_videos(ledger: dict, out_dir, *, checkpoint=None, settings: dict | None = None) -> dict:
    """Videos of the median and the worst test episode of a suite run, for its report.

    ``rig-grasp`` / ``cube-real``: the episodes of median and largest surrogate position error
    (``pick_episode``), recorded / analytic / surrogate; ``policy``: rollouts of the objects of
    median and largest success-rate gap, analytic / surrogate; ``transfer``: the surrogate-tuned policy on the
    held-out objects of median and largest sim-minus-rig success gap, hybrid simulator / rig
    (``transfer_video``). Written to
    ``out_dir/videos/{median,worst}.mp4`` with a PNG still each. ``settings``: the suite's
    ``video`` section (enabled, width, height, fps, speed, max_seconds).

    Returns {"videos": [{which, episode, video, still (relative to ``out_dir``), ...}]} or
    {"skipped": why} (disabled, rendering unavailable, nothing to rank); a rendering failure is
    reported there too, never raised, so a suite's results are never lost to a video.
    """
    s = {"enabled": True, "width": 320, "height": 240, "fps": 30, "speed": 1.0, "max_seconds": None, **(settings or {})}
    if not s["enabled"]:
        return {"skipped": "disabled (--no-video, or video.enabled: false in the suite config)"}
    suite = ledger.get("suite")
    if suite == "policy":
        if not policy_picks(ledger):
            return {"skipped": "the surrogate was not evaluated: no success-rate gap to pick rollouts by"}
    elif suite == "transfer":
        from .transfer_video import transfer_picks

        if not transfer_picks(ledger):
            return {"skipped": "no held-out object has sim and rig success rates of the surrogate-tuned policy"}
    elif suite not in ("cube-real", "rig-grasp"):
        return {"skipped": f"suite {suite!r} has no episodes to render"}
    elif ranking_model(ledger) is None:
        return {"skipped": "no model has per-episode pose errors"}
    why = rendering_unavailable()
    if why:
        return {"skipped": why}
    base = Path(out_dir)
    vids = []
    try:
        for which, clip in _clips_of(ledger, checkpoint):
            res = render_to_files(clip, base / "videos" / f"{which}.mp4", still=base / "videos" / f"{which}.png",
                                  width=s["width"], height=s["height"], fps=s["fps"], speed=s["speed"],
                                  max_seconds=s["max_seconds"])
            res["video"] = str(Path(res["video"]).relative_to(base))
            res["still"] = str(Path(res["still"]).relative_to(base))
            vids.append(res)
    except (SurrogateError, OSError, RuntimeError, ValueError, KeyError) as e:
        return {"skipped": f"rendering failed ({type(e).__name__}: {e})", "videos": vids}
    return {"videos": vids}


def render_command(a) -> None:
    """``surrogate render``: a benchmark episode or an env rollout as a side-by-side video (``a``: its arguments)."""
    import json

    out = Path(a.out)
    for path in (out, a.still, a.gif):
        if path is not None and Path(path).exists() and not a.overwrite:
            raise FileExistsError(f"{path}: already exists (pass --overwrite to replace it)")
    if a.env:
        from ..envs.task import DEFAULT_RELEASE
        from ..paths import release_checkpoint

        # without --checkpoint the surrogate panel is the release the environments load for contact="surrogate"
        checkpoint = a.checkpoint or str(release_checkpoint(DEFAULT_RELEASE))
        given = {k: getattr(a, k) for k in ("object", "object_seed", "seed", "duration") if getattr(a, k) is not None}
        clip = env_clip(a.env, checkpoint=checkpoint, **given)  # the rest: env_clip's defaults, as --help says
    else:
        if a.ledger:
            ledger, lf = load_ledger(a.ledger)
        else:
            if not a.episode:
                raise ConfigError("--suite needs --episode ID (--which needs a ledger's per-episode errors: give --ledger, "
                                  "the --out folder of `surrogate bench`)", key="episode")
            ledger, lf = suite_ledger(a.suite, overrides=a.set or [], test_data=a.test_data, progress=not a.quiet), None
            a.episode = suite_episode_key(ledger, a.episode) if a.episode else a.episode
        clip = benchmark_clip(ledger, episode=a.episode, which=a.which, analytic=a.analytic or "identified",
                              checkpoint=a.checkpoint, ledger_file=lf, progress=not a.quiet)
    res = render_to_files(clip, out, still=a.still, gif=a.gif, width=a.width, height=a.height, fps=a.fps,
                          speed=a.speed, max_seconds=a.max_seconds, still_at=a.still_at, gif_width=a.gif_width)
    if a.json:
        print(json.dumps(res, indent=1))
        return
    print(f"wrote {res['video']} ({res['frames']} frames, {res['seconds']:.1f} s): {clip.title}")
    for label, err in (res.get("panels") or {}).items():
        print(f"  {label:24s} mean position error " + ("— (the rollout blew up)" if err is None else f"{err:.2f} % of object size"))
    if res.get("ledger_pos_pct_size") is not None:
        print(f"  the ledger's figure for this episode ({res['ranked_by']}): {res['ledger_pos_pct_size']:.2f} % of object size")
    for label, outcome in (res.get("outcomes") or {}).items():
        print(f"  {label:24s} {outcome}")
    for k in ("still", "gif"):
        if res.get(k):
            print(f"  {k}: {res[k]}")
