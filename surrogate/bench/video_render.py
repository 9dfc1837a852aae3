"""Rendering clips to frames, and writing videos and stills (headless ``mujoco.Renderer``).

Each panel is labelled with its model, the time and its pose error at that frame; the object's
trace, the path of its centre of mass so far, is drawn into the renderer's scene as line segments
(``mjv_initGeom`` / ``mjv_connector``): the panel's own path in its colour and, in the model
panels, the recorded path in white for reference. MP4 goes through imageio with its ffmpeg; GIF
and PNG need only Pillow. Every output is written atomically with the user's umask.

Shapes: F = recorded frames, N = video frames, P = panels, H x W = one panel's pixels.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from ..atomic import atomic_file, write_bytes_atomic
from ..envs.grasp import make_renderer
from ..errors import ConfigError, SurrogateError
from .video_clips import Clip, Panel

PANEL_RGBA = {"recorded": (0.20, 0.75, 0.30, 1.0), "analytic": (0.03, 0.32, 0.61, 1.0),
              "surrogate": (0.85, 0.28, 0.00, 1.0)}

REFERENCE_RGBA = (1.0, 1.0, 1.0, 0.55)  # the recorded path drawn in the model panels

HEADER_PX = 20  # title strip above the panels


class RenderError(SurrogateError):
    """Rendering or video writing is not possible here (no OpenGL context, no MP4 writer)."""


def rendering_unavailable() -> str | None:
    """Why videos cannot be rendered here (None when they can): no OpenGL context for
    ``mujoco.Renderer`` (e.g. no display and ``MUJOCO_GL`` unset), or no MP4 writer."""
    try:
        import mujoco

        m = mujoco.MjModel.from_xml_string("<mujoco><worldbody><geom type='sphere' size='.1'/></worldbody></mujoco>")
        r = mujoco.Renderer(m, 16, 16)
        try:
            d = mujoco.MjData(m)
            r.update_scene(d)
            r.render()
        finally:
            r.close()
    except Exception as e:  # any backend failure: no GL library, no device, no display
        return (f"MuJoCo cannot render here ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                f"on a machine without a display set MUJOCO_GL=egl (MUJOCO_GL is {os.environ.get('MUJOCO_GL')!r})")
    try:
        import imageio.v2  # noqa: F401
        import imageio_ffmpeg

        imageio_ffmpeg.get_ffmpeg_exe()
    except Exception as e:
        return f"no MP4 writer ({type(e).__name__}: {e}); reinstall the package's dependencies imageio and imageio-ffmpeg: pip install imageio imageio-ffmpeg"
    return None


def _camera(clip: Clip):
    """A fixed free camera framing the first panel's object path and the bodies near the object
    (a hand), seen from above at 30 degrees."""
    import mujoco

    adr = clip.object_qpos_adr
    q = clip.panels[0].qpos
    pts = [q[:, adr:adr + 3]]
    m, d = clip.model, mujoco.MjData(clip.model)
    start = q[0, adr:adr + 3]
    for f in np.linspace(0, len(q) - 1, min(len(q), 12)).round().astype(int):
        d.qpos[:] = q[f]
        mujoco.mj_kinematics(m, d)
        xb = d.xpos[1:]
        pts.append(xb[np.linalg.norm(xb - start, axis=1) < 0.3])  # the hand, not far-away bodies
    p = np.concatenate(pts)
    p = p[np.isfinite(p).all(axis=1)]
    lo, hi = p.min(axis=0), p.max(axis=0)
    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_FREE
    cam.lookat[:] = (lo + hi) / 2.0
    extent = max(float(np.linalg.norm(hi - lo)), 5.0 * clip.object_size)
    cam.distance, cam.azimuth, cam.elevation = 1.15 * extent + 2.0 * clip.object_size, 135.0, -25.0
    return cam


def _add_trace(scn, points: np.ndarray, rgba, px: float, max_segments: int = 400) -> None:
    """Append the path ``points`` [K, 3] to the renderer's scene as line segments ``px`` pixels
    wide (as many as fit; lines cost a software renderer a fraction of what capsules do)."""
    import mujoco

    if len(points) < 2:
        return
    idx = np.unique(np.linspace(0, len(points) - 1, min(len(points), max_segments + 1)).round().astype(int))
    pts = np.asarray(points[idx], float)
    rgba = np.asarray(rgba, np.float32)
    for a, b in zip(pts[:-1], pts[1:]):
        if scn.ngeom >= scn.maxgeom:
            return
        if not (np.isfinite(a).all() and np.isfinite(b).all()) or np.linalg.norm(b - a) < 1e-9:
            continue
        g = scn.geoms[scn.ngeom]
        mujoco.mjv_initGeom(g, mujoco.mjtGeom.mjGEOM_LINE, np.zeros(3), np.zeros(3), np.eye(3).ravel(), rgba)
        mujoco.mjv_connector(g, mujoco.mjtGeom.mjGEOM_LINE, px, a, b)
        scn.ngeom += 1


def _font(px: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=px)
    except TypeError:  # Pillow < 10.1
        return ImageFont.load_default()


def _rgb255(rgba) -> tuple:
    return tuple(int(255 * c) for c in rgba[:3])


def _label(img, panel: Panel, f: int, t: float, font, small) -> None:
    """Draw the panel's label, its note, the time and its current error onto ``img`` (PIL)."""
    from PIL import ImageDraw

    d = ImageDraw.Draw(img)
    col = _rgb255(PANEL_RGBA.get(panel.kind, (1, 1, 1, 1)))
    d.rectangle([4, 4, 14, 14], fill=col)
    d.text((19, 2), panel.label, fill=(255, 255, 255), font=font, stroke_width=1, stroke_fill=(0, 0, 0))
    if panel.note:
        d.text((6, 19), panel.note, fill=(235, 235, 235), font=small, stroke_width=1, stroke_fill=(0, 0, 0))
    line = f"t {t:5.2f} s"
    if panel.pos_pct is not None:
        ok = panel.valid is None or panel.valid[f]
        line += (f"   error {panel.pos_pct[f]:.1f} % of size, {panel.rot_deg[f]:.1f} deg" if ok else "   (not tracked)")
    d.text((6, img.height - 16), line, fill=(255, 255, 255), font=small, stroke_width=1, stroke_fill=(0, 0, 0))


def render_clip(clip: Clip, *, width: int = 320, height: int = 240, fps: float = 30.0, speed: float = 1.0,
                max_seconds: float | None = None, trace: bool = True) -> np.ndarray:
    """The clip's video frames.

    Args:
      width, height: pixels of one panel (rounded down to even numbers, as H.264 needs).
      fps: video frames per second; speed: episode seconds per video second (0.5: half speed).
      max_seconds: show at most this much of the episode (None: all of it).
      trace: draw the object's centre-of-mass path.
    Returns:
      [N, HEADER_PX + H, P * W, 3] uint8.
    """
    import mujoco
    from PIL import Image, ImageDraw

    if fps <= 0 or speed <= 0:
        raise ConfigError(f"fps and speed must be > 0 (got {fps}, {speed})", key="fps")
    w, h = max(32, int(width) // 2 * 2), max(32, int(height) // 2 * 2)
    m = clip.model
    span = float(clip.times[-1])
    if max_seconds is not None:
        span = min(span, float(max_seconds))
    n = int(np.floor(span / speed * fps + 1e-9)) + 1
    frame_idx = np.minimum(np.searchsorted(clip.times, np.arange(n) * speed / fps - 1e-9), len(clip.times) - 1)
    cam = _camera(clip)
    adr = clip.object_qpos_adr
    ref = clip.panels[0].qpos[:, adr:adr + 3] if clip.panels[0].kind == "recorded" else None
    font, small = _font(13), _font(11)
    out = np.zeros((n, HEADER_PX + h, w * len(clip.panels), 3), np.uint8)
    try:
        renderer = make_renderer(m, h, w)
    except Exception as e:
        raise RenderError(f"cannot create a MuJoCo renderer ({type(e).__name__}: {e}); set MUJOCO_GL=egl "
                          "before MuJoCo is imported on a machine without a display") from e
    try:
        d = mujoco.MjData(m)
        header = Image.new("RGB", (w * len(clip.panels), HEADER_PX), (24, 24, 24))
        ImageDraw.Draw(header).text((6, 3), clip.title, fill=(255, 255, 255), font=font)
        out[:, :HEADER_PX] = np.asarray(header)
        for k, f in enumerate(frame_idx):
            for j, panel in enumerate(clip.panels):
                d.qpos[:] = panel.qpos[f]
                mujoco.mj_forward(m, d)
                renderer.update_scene(d, camera=cam)
                renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0  # 20x the cost on a software renderer
                if trace:
                    if ref is not None and panel.kind != "recorded":
                        _add_trace(renderer.scene, ref[: f + 1], REFERENCE_RGBA, 2)
                    _add_trace(renderer.scene, panel.qpos[: f + 1, adr:adr + 3], PANEL_RGBA.get(panel.kind, (1, 1, 1, 1)), 3)
                img = Image.fromarray(renderer.render())
                _label(img, panel, int(f), float(clip.times[f]), font, small)
                out[k, HEADER_PX:, j * w:(j + 1) * w] = np.asarray(img)
    finally:
        renderer.close()
    return out


def write_video(frames: np.ndarray, path, *, fps: float = 30.0) -> Path:
    """Write [N, H, W, 3] uint8 frames to ``path`` atomically: ``.mp4`` (H.264, the ``video``
    extra's imageio + ffmpeg) or ``.gif`` (Pillow)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".gif":
        from PIL import Image

        imgs = [Image.fromarray(f) for f in frames]
        buf = io.BytesIO()
        imgs[0].save(buf, format="GIF", save_all=True, append_images=imgs[1:], duration=int(round(1000 / fps)), loop=0,
                     optimize=True)
        write_bytes_atomic(path, buf.getvalue())
        return path
    if suffix != ".mp4":
        raise ConfigError("the video must be .mp4 or .gif", file=path, key="out")
    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg  # noqa: F401
    except ImportError as e:
        raise RenderError(f"writing {path} needs imageio and imageio-ffmpeg (dependencies of the package): pip install imageio imageio-ffmpeg ({e})") from e
    with atomic_file(path) as tmp:
        writer = imageio.get_writer(tmp, fps=fps, codec="libx264", quality=7, pixelformat="yuv420p",
                                    macro_block_size=2, ffmpeg_log_level="error", format="FFMPEG")
        try:
            for f in frames:
                writer.append_data(f)
        finally:
            writer.close()
    return path


def write_still(frame: np.ndarray, path) -> Path:
    """Write one [H, W, 3] uint8 frame as a PNG (or JPEG) atomically."""
    from PIL import Image

    path = Path(path)
    fmt = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG"}.get(path.suffix.lower())
    if fmt is None:
        raise ConfigError("a still must be .png or .jpg", file=path, key="still")
    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format=fmt, optimize=True)
    write_bytes_atomic(path, buf.getvalue())
    return path


def still_index(clip: Clip, frames: np.ndarray, *, at: float | None = None, speed: float = 1.0, fps: float = 30.0) -> int:
    """Index of the video frame to keep as a still: at episode time ``at`` s, default the end
    (where the traces are complete)."""
    if at is None:
        return len(frames) - 1
    return int(min(len(frames) - 1, max(0, round(at / speed * fps))))


def render_to_files(clip: Clip, out, *, still=None, gif=None, width: int = 320, height: int = 240, fps: float = 30.0,
                    speed: float = 1.0, max_seconds: float | None = None, still_at: float | None = None,
                    gif_width: int | None = None) -> dict:
    """Render ``clip`` and write the video ``out`` (.mp4 or .gif), optionally a PNG ``still``
    and a ``gif``. Returns {"video", "still", "gif", "frames", "seconds"} plus ``clip.info``."""
    frames = render_clip(clip, width=width, height=height, fps=fps, speed=speed, max_seconds=max_seconds)
    res = {**clip.info, "video": str(write_video(frames, out, fps=fps)), "frames": int(len(frames)),
           "seconds": float(len(frames) / fps)}
    if still is not None:
        res["still"] = str(write_still(frames[still_index(clip, frames, at=still_at, speed=speed, fps=fps)], still))
    if gif is not None:
        g = frames
        if gif_width is not None and gif_width < frames.shape[2]:
            from PIL import Image

            s = gif_width / frames.shape[2]
            size = (int(gif_width), int(round(frames.shape[1] * s)))
            g = np.stack([np.asarray(Image.fromarray(f).resize(size, Image.LANCZOS)) for f in frames[:: 2]])
        res["gif"] = str(write_video(g, gif, fps=fps if g is frames else fps / 2))
    return res
