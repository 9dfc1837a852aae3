"""Scenes for recorded episodes and the surrogate as a predictor of whole episodes.

Every model in a suite starts from the same first-state estimate
(``analytic.initial_free_state``) so that differences come from the contact model only.
"""

from __future__ import annotations

from tqdm import tqdm

from ..capture import DatasetMeta
from ..scenes.from_capture import scene_for_episode
from .analytic import initial_free_state

DEFAULT_MARGIN = 0.02  # m, when a checkpoint card does not say


def object_scene(ep, *, substeps: int, mode: str, margin: float = DEFAULT_MARGIN):
    """The MuJoCo scene of a free-object episode (no hand), owned pairs in ``mode``."""
    return scene_for_episode(ep, DatasetMeta(), margin=margin, substeps=substeps, contact_mode=mode)


def surrogate_predict(checkpoint, episodes, *, substeps: int, init_frames: int, progress: bool = True):
    """Roll out ``episodes`` with the checkpoint's surrogate owning the contact pairs (or, for the
    end-to-end peer's checkpoint, with the peer alone).

    Returns ({episode_id: [T, 7] poses at the episode's frames}, card).
    """
    from ..model.checkpoint import is_end_to_end, load_checkpoint
    from ..sim.rollout import rollout_mujoco

    model, card = load_checkpoint(checkpoint)
    if is_end_to_end(card):  # the end-to-end peer learns the whole step: no MuJoCo scene (model.gns_rollout)
        from ..model.gns_rollout import predict_episodes
        return predict_episodes(model, episodes, init_frames=init_frames, gravity_nd=card["data"].get("gravity_nd"),
                                progress=progress), card
    margin = float(card.get("data", {}).get("margin_m", DEFAULT_MARGIN))
    out = {}
    groups = {}
    for e in episodes:
        groups.setdefault((e.object.name, e.provenance.capture_rate_hz, tuple(e.environment.gravity)), []).append(e)
    for group in tqdm(list(groups.values()), desc="surrogate rollouts", unit="object", disable=not progress):
        scene = object_scene(group[0], substeps=substeps, mode="external", margin=margin)
        # Long tosses do not hold up short ones: roll out in length-sorted buckets.
        group = sorted(group, key=lambda e: e.num_frames)
        for start in range(0, len(group), 16):
            chunk = group[start:start + 16]
            states = []
            for e in chunk:
                q, v = initial_free_state(e, k=init_frames)
                states.append((q[:3], q[3:7], v[:3], v[3:6]))
            pred = rollout_mujoco(model, scene, states, max(e.num_frames for e in chunk), substeps=substeps)
            for e, p in zip(chunk, pred):
                out[e.episode_id] = p[: e.num_frames]
    return out, card
