"""Whole-episode rollouts of the end-to-end peer (``surrogate.baselines.gns``), no MuJoCo.

``predict_episodes`` is the peer's one rollout API: the validation rollouts of its training and
the ``cube-real`` row both call it. Every episode starts from the benchmarks' first-state estimate
(``surrogate.estimate.initial_free_state``); the history of points before frame 0 is that free
motion extrapolated backwards (``gns_geometry.history_from_state``); then the learned step runs
once per captured frame, the pose recovered by shape matching every step.
"""

from __future__ import annotations

import numpy as np
import torch
from tqdm import tqdm

from ..errors import CaptureError
from ..estimate import initial_free_state
from .gns import GNSNet, step
from .gns_geometry import episode_body_points, history_from_state, poses_from_motion, shape_match


def scene_units(ep) -> dict:
    """An episode's units and floor: L (m), dt (s), up [3], floor height along up (m), gravity in L / frame^2.

    The floor is the capture's horizontal surface at ``environment.height``; gravity must be vertical.
    """
    g = np.asarray(ep.environment.gravity, dtype=float)
    gn = float(np.linalg.norm(g))
    if gn <= 0 or np.linalg.norm(g[:2]) > 1e-9 * gn or g[2] > 0:
        raise CaptureError(f"the end-to-end peer needs gravity along -z, got {g.tolist()}", episode=ep.episode_id,
                           field="environment.gravity")
    L, dt = float(ep.object.size), 1.0 / float(ep.provenance.capture_rate_hz)
    return {"L": L, "dt": dt, "up": -g / gn, "floor": float(ep.environment.height), "gravity_nd": gn * dt * dt / L}


def check_units(ep, trained_gravity_nd: float | None) -> dict:
    """``scene_units(ep)``, refused if its gravity per frame^2 in L differs from the one the peer learned.

    The peer never sees metres or seconds, so it has learned gravity as a fixed acceleration in
    L / frame^2: an object of another size or a capture at another rate would fall at the wrong rate.
    """
    u = scene_units(ep)
    if trained_gravity_nd is not None and abs(u["gravity_nd"] / trained_gravity_nd - 1.0) > 0.01:
        raise CaptureError(f"gravity is {u['gravity_nd']:.5g} L/frame^2 here (size {u['L']} m at "
                           f"{1 / u['dt']:g} Hz); the end-to-end peer was trained at {trained_gravity_nd:.5g}: "
                           "it cannot predict objects of another size or captures at another rate",
                           episode=ep.episode_id, field="object.size")
    return u


@torch.no_grad()
def rollout(model: GNSNet, hist: torch.Tensor, body: torch.Tensor, up: torch.Tensor, floor: torch.Tensor,
            frames: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Roll ``frames`` frames (frame 0 = the last of ``hist``) out of point histories.

    Args: hist [B, H + 1, V, 3], body [B, V, 3], floor [B] in L; up [B, 3] (float64).
    Returns: R [B, frames, 3, 3], p [B, frames, 3] (L).
    """
    R0, p0 = shape_match(hist[:, -1], body)
    Rs, ps = [R0], [p0]
    for _ in range(frames - 1):
        x, R, p = step(model, hist, body, up, floor)
        hist = torch.cat([hist[:, 1:], x[:, None]], dim=1)
        Rs.append(R)
        ps.append(p)
    return torch.stack(Rs, dim=1), torch.stack(ps, dim=1)


def _initial(model: GNSNet, ep, u: dict, init_frames: int):
    body = episode_body_points(ep, model.grid)
    q, v = initial_free_state(ep, k=init_frames)
    hist = history_from_state(q, v, body, frames=model.history, dt=u["dt"], gravity=ep.environment.gravity)
    return hist / u["L"], body / u["L"]


def predict_episodes(model: GNSNet, episodes, *, init_frames: int, gravity_nd: float | None = None,
                     chunk: int = 64, progress: bool = True) -> dict:
    """{episode_id: [T, 7] predicted poses at the episode's frames} (m; quaternion w, x, y, z).

    ``gravity_nd``: the gravity (L / frame^2) the peer was trained at (its card's); episodes at
    another value are refused (``check_units``). Episodes roll out in length-sorted chunks.
    """
    was_training = model.training
    model.eval()
    order = sorted(episodes, key=lambda e: e.num_frames)
    out = {}
    chunks = [order[k:k + chunk] for k in range(0, len(order), chunk)]
    for group in tqdm(chunks, desc="end-to-end rollouts", unit="chunk", disable=not progress):
        units = [check_units(e, gravity_nd) for e in group]
        init = [_initial(model, e, u, init_frames) for e, u in zip(group, units)]
        dev = next(model.parameters()).device
        hist = torch.as_tensor(np.stack([h for h, _ in init]), device=dev)
        body = torch.as_tensor(np.stack([b for _, b in init]), device=dev)
        up = torch.as_tensor(np.stack([u["up"] for u in units]), device=dev)
        floor = torch.as_tensor([u["floor"] / u["L"] for u in units], dtype=torch.float64, device=dev)
        R, p = rollout(model, hist, body, up, floor, max(e.num_frames for e in group))
        R, p = R.cpu().numpy(), p.cpu().numpy()
        for i, (e, u) in enumerate(zip(group, units)):
            T = e.num_frames
            out[e.episode_id] = poses_from_motion(R[i, :T], p[i, :T] * u["L"])
    model.train(was_training)
    return out
