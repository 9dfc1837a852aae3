"""Capture datasets -> scenes -> in-memory contact-graph windows for training.

Any capture dataset with an object pose and a scene description works: tosses (no hand)
and rig grasps (a hand whose joints are named in the dataset meta; fingertip wrench
sensors become per-node force/torque targets). Features are computed once with the same
builder the live stepper uses (``graph_from_mjdata``, through ``batch_graph.GraphBuilder``) and kept in memory; nothing is
cached on disk. Evaluation-only ``truth.*`` fields are never loaded here.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch
from torch.utils.data import Dataset
from tqdm import tqdm

from ..capture import read_dataset
from ..errors import CaptureError
from ..scenes.from_capture import recorded_joint_columns, scene_for_episode
from . import targets as T
from .batch_graph import GraphBuilder
from .graph import SceneInfo, graph_from_mjdata

DATA_DEFAULTS = dict(
    root=None, val_fraction=0.2, split_seed=0, margin=0.02, substeps=4, window=T.DEFAULT_WINDOW,
    order=T.DEFAULT_ORDER, unroll_frames=0, max_episodes=None, max_train_episodes=None, hold_out_min_frames=None,
    batch_size=128, num_workers=0, frame_stride=1, bench_split=None,
)


def sensor_pads(scene, meta) -> list[tuple[int, int, int]]:
    """[(sensor column, pad site id, pad body id)] for the dataset's force/torque sensors.

    Sensor names follow the scenes: ``ft_<pad>`` (e.g. ``ft_left`` on ``pad_left``) or the
    MuJoCo sensor names ``ft_<pad>_force``; a name that matches no pad is ignored.
    """
    m = scene.model
    out = []
    for s, name in enumerate(meta.wrench_sensors or []):
        core = name[3:] if name.startswith("ft_") else name
        core = core[:-6] if core.endswith("_force") else core
        for site_name in (f"pad_{core}_site", f"{core}_site", core):
            try:
                site = m.site(site_name).id
            except KeyError:
                continue
            out.append((s, site, int(m.site_bodyid[site])))
            break
    return out


def episode_graphs(ep, meta, *, margin=0.02, substeps=4, window=T.DEFAULT_WINDOW, order=T.DEFAULT_ORDER,
                   unroll_frames=0, frame_stride=1, scene=None):
    """Training samples of one episode: a list of graphs (frames with contact candidates) with targets.

    ``frame_stride`` keeps every n-th frame: neighbouring frames of a 120 Hz grasp are nearly
    the same sample, so striding cuts feature time and epoch time with little loss of data.

    Each graph carries: ``wrench`` [1, 6] net contact wrench on the object (world; N, N m) by
    inverse dynamics; ``state0`` [1, 13] smoothed pos, quat, vel (world), omega (body);
    ``inertia_b`` [1, 3, 3]; ``frame_dt`` [1]; ``future`` [1, K, 7] smoothed poses of the next K
    frames and ``future_ok`` [1, K]; ``ft`` [N, 6] / ``ft_mask`` [N] measured pad wrenches (world,
    about the pad body's COM) where the episode has wrench sensors. Raises CaptureError naming
    the episode if anything derived is non-finite.
    """
    scene = scene or scene_for_episode(ep, meta, margin=margin, substeps=substeps)
    m = scene.model
    d = mujoco.MjData(m)
    info = SceneInfo.from_scene(scene)
    builder = GraphBuilder(m, object_body=info.object_body, length=info.length, owned_pair_keys=info.owned_pair_keys)
    sm = T.smooth_pose(ep.timestamps, ep.object_pose, ep.object_pose_valid, window=window, order=order)
    W = T.contact_wrench(sm, ep.object.mass, ep.object.inertia, ep.environment.gravity)
    if not np.isfinite(W[sm["ok"]]).all():
        raise CaptureError("non-finite inverse-dynamics wrench", episode=ep.episode_id, field="object_pose")
    qa, da = scene.object_qpos_adr, scene.object_dof_adr
    hand_map = recorded_joint_columns(scene.model, meta.joint_names) if ep.joint_pos is not None else []
    sensors = sensor_pads(scene, meta) if ep.wrench is not None else []
    Tn = ep.num_frames
    K = int(unroll_frames)
    out = []
    dt = float(np.median(np.diff(ep.timestamps)))
    for k in range(0, Tn - K, max(1, int(frame_stride))):
        if not sm["ok"][k] or (K and not sm["ok"][k + 1:k + K + 1].all()):
            continue
        d.qpos[qa:qa + 3], d.qpos[qa + 3:qa + 7] = sm["pos"][k], sm["quat"][k]
        d.qvel[da:da + 3], d.qvel[da + 3:da + 6] = sm["vel"][k], sm["omega_b"][k]
        for c, adr, dadr in hand_map:
            d.qpos[adr] = ep.joint_pos[k, c]
            if ep.joint_vel is not None:
                d.qvel[dadr] = ep.joint_vel[k, c]
        mujoco.mj_forward(m, d)
        g = graph_from_mjdata(m, d, info, body_vel={scene.object_body_id: (sm["vel"][k], sm["omega"][k])}, builder=builder)
        if g.edge_index.shape[1] == 0:
            continue
        g.wrench = torch.as_tensor(W[k], dtype=torch.float32)[None]
        g.state0 = torch.as_tensor(np.concatenate([sm["pos"][k], sm["quat"][k], sm["vel"][k], sm["omega_b"][k]]), dtype=torch.float32)[None]
        g.inertia_b = torch.as_tensor(np.asarray(ep.object.inertia, float), dtype=torch.float32)[None]
        g.frame_dt = torch.tensor([dt], dtype=torch.float32)
        fut = np.concatenate([sm["pos"][k + 1:k + K + 1], sm["quat"][k + 1:k + K + 1]], axis=1) if K else np.zeros((0, 7))
        g.future = torch.as_tensor(fut, dtype=torch.float32)[None]
        ft = torch.zeros(g.num_nodes, 6)
        mask = torch.zeros(g.num_nodes)
        for s, site, body in sensors:
            hit = (g.body_id == body).nonzero()
            if len(hit):
                R = d.site_xmat[site].reshape(3, 3)
                f = R @ ep.wrench[k, s, :3]
                tau = R @ ep.wrench[k, s, 3:] + np.cross(d.site_xpos[site] - d.xipos[body], f)
                # capture convention: observation.wrench is the contact wrench acting on the pad
                # (sensor frame, torque about the sensor site) -- the pad node's target as it is
                ft[hit[0, 0]] = torch.as_tensor(np.concatenate([f, tau]), dtype=torch.float32)
                mask[hit[0, 0]] = 1.0
        g.ft, g.ft_mask = ft, mask
        g.episode = torch.tensor([int(ep.episode_id) if str(ep.episode_id).isdigit() else -1])
        g.frame = torch.tensor([k])
        for key in ("normal", "dist", "r_obj", "r_oth", "vel", "omega"):
            if not torch.isfinite(getattr(g, key)).all():
                raise CaptureError(f"non-finite contact feature {key} at frame {k}", episode=ep.episode_id, field="object_pose")
        out.append(g)
    return out


def split_episodes(ids, *, val_fraction: float, seed: int, always_val=()):
    """Fixed seeded split of episode ids: (train ids, val ids), each in the given order.

    ``always_val`` ids (e.g. the tosses long enough for >= 1 s rollouts) are always held out;
    ``val_fraction`` of the others are drawn with ``numpy.random.default_rng(seed)``.
    """
    keep = set(always_val)
    ids_all = list(ids)
    ids = [i for i in ids_all if i not in keep]
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(ids))
    n_val = int(round(val_fraction * len(ids))) if len(ids) > 1 else 0
    val = set(perm[:n_val].tolist())
    val_ids = {i for k, i in enumerate(ids) if k in val} | keep
    return [i for i in ids_all if i not in val_ids], [i for i in ids_all if i in val_ids]


def load_capture(root, *, max_episodes=None):
    """Read and validate a capture dataset (raises CaptureError naming the episode on bad data)."""
    ds = read_dataset(root, on_error="raise")
    if max_episodes:
        ds.episodes = ds.episodes[: int(max_episodes)]
    return ds


class GraphWindows(Dataset):
    """In-memory list of contact graphs (with targets) from some episodes of a capture dataset."""

    def __init__(self, episodes, meta, *, progress: bool = True, desc: str = "contact graphs", **kw):
        self.graphs = []
        self.episode_ids = []
        for ep in tqdm(episodes, desc=desc, unit="episode", disable=not progress):
            gs = episode_graphs(ep, meta, **kw)
            self.graphs.extend(gs)
            self.episode_ids.append(ep.episode_id)

    def __len__(self):
        return len(self.graphs)

    def __getitem__(self, i):
        return self.graphs[i]
