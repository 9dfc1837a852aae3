"""Predictors of whole free-object episodes: MuJoCo's analytic contact and the learned models.

Every model in a suite starts from the same first-state estimate
(``analytic.initial_free_state``) so that differences come from the contact model only.

Tosses are rolled out in batches (``toss_chunks``): per object, capture rate and gravity, sorted
by length, ``TOSS_BATCH`` at a time. A suite's tasks are those batches, so a batch holds the same
tosses on every backend and a batched learned model sees the same inputs.

A learned row's predictor is chosen by its checkpoint card's model class (``learned_for``, the
one place that dispatches on it): a model class that predicts whole tosses by other means (an
end-to-end learned simulator) adds one ``LEARNED`` entry and needs no change to the suites.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from ..capture import DatasetMeta
from ..errors import ConfigError
from ..scenes.from_capture import scene_for_episode, scene_key
from .analytic import AnalyticParams, TossSet, initial_free_state, simulate_tosses

DEFAULT_MARGIN = 0.02  # m, when a checkpoint card does not say
TOSS_BATCH = 16  # tosses per batched rollout: long tosses do not hold up short ones


def object_scene(ep, *, substeps: int, mode: str, margin: float = DEFAULT_MARGIN):
    """The MuJoCo scene of a free-object episode (no hand), owned pairs in ``mode``."""
    return scene_for_episode(ep, DatasetMeta(), margin=margin, substeps=substeps, contact_mode=mode)


def toss_chunks(episodes, size: int = TOSS_BATCH) -> list[list]:
    """Batches of at most ``size`` episodes of one scene (``scenes.from_capture.scene_key``: object, capture rate,
    gravity), each group sorted by length (stable), groups in order of first appearance."""
    groups = {}
    for e in episodes:
        groups.setdefault(scene_key(e), []).append(e)
    out = []
    for group in groups.values():
        group = sorted(group, key=lambda e: e.num_frames)
        out += [group[i:i + size] for i in range(0, len(group), size)]
    return out


def predict_analytic(params: list[AnalyticParams], episodes, *, substeps: int, init_frames: int,
                     threads: int = 2) -> list[dict]:
    """Predictions of each parameter set: a list (per set) of {episode_id: [T, 7]}."""
    out = [dict() for _ in params]
    by_obj = {}
    for e in episodes:
        by_obj.setdefault(scene_key(e), []).append(e)
    for group in by_obj.values():
        scene = object_scene(group[0], substeps=substeps, mode="analytic")
        tosses = TossSet.from_episodes(group, substeps=substeps, k=init_frames)
        pred = simulate_tosses(scene, params, tosses, threads=threads)
        for p in range(len(params)):
            for i, e in enumerate(group):
                out[p][e.episode_id] = pred[p, i, : e.num_frames]
    return out


def surrogate_predict(checkpoint, episodes, *, substeps: int, init_frames: int, progress: bool = True):
    """Roll out ``episodes`` with the checkpoint's surrogate owning the contact pairs (``checkpoint``: a folder, or
    an already loaded ``(model, card)``, such as a study's variant of a release).

    Returns ({episode_id: [T, 7] poses at the episode's frames}, card).
    """
    from ..model.checkpoint import load_checkpoint
    from ..sim.rollout import rollout_mujoco

    model, card = checkpoint if isinstance(checkpoint, tuple) else load_checkpoint(checkpoint)
    margin = float(card.get("data", {}).get("margin_m", DEFAULT_MARGIN))
    out = {}
    for chunk in tqdm(toss_chunks(episodes), desc="surrogate rollouts", unit="batch", disable=not progress):
        scene = object_scene(chunk[0], substeps=substeps, mode="external", margin=margin)
        states = []
        for e in chunk:
            q, v = initial_free_state(e, k=init_frames)
            states.append((q[:3], q[3:7], v[:3], v[3:6]))
        pred = rollout_mujoco(model, scene, states, max(e.num_frames for e in chunk), substeps=substeps)
        for e, p in zip(chunk, pred):
            out[e.episode_id] = p[: e.num_frames]
    return out, card


# ----------------------------------------------------------------------------- learned rows


def peer_predict(checkpoint, episodes, *, substeps: int, init_frames: int, progress: bool = True):
    """Roll out ``episodes`` with the end-to-end peer alone (it learns the whole step: no MuJoCo scene;
    ``baselines.gns_rollout``); ``substeps`` is unused. Returns ({episode_id: [T, 7] poses}, card)."""
    from ..baselines.gns_rollout import predict_episodes
    from ..model.checkpoint import load_checkpoint

    model, card = load_checkpoint(checkpoint)
    return predict_episodes(model, episodes, init_frames=init_frames, gravity_nd=card["data"].get("gravity_nd"),
                            progress=progress), card


def check_contact_model(checkpoint) -> None:
    """Load a contact model's checkpoint (``model.checkpoint.load_checkpoint``): raises what is wrong with it,
    and a ConfigError for the end-to-end peer, which has no contact model to put inside MuJoCo."""
    from ..model.checkpoint import END_TO_END, load_checkpoint

    if card_class(checkpoint) in END_TO_END:
        raise ConfigError(f"{checkpoint} is the end-to-end peer (GNS, no MuJoCo): it predicts a free object, not the "
                          "hand-object coupling of the grasp suites; score it with cube-real", key="--checkpoint")
    load_checkpoint(checkpoint)


def check_peer(checkpoint) -> None:
    """Load the end-to-end peer's checkpoint: raises what is wrong with it."""
    from ..baselines import gns  # noqa: F401  (registers the peer's checkpoints)
    from ..model.checkpoint import load_checkpoint

    load_checkpoint(checkpoint)


@dataclass(frozen=True)
class Learned:
    """How checkpoints of one model class predict tosses.

    predict: ``predict(checkpoint, episodes, *, substeps, init_frames, progress) -> ({episode_id:
      [T, 7] poses}, card)`` (``surrogate_predict``'s signature); called once per ``toss_chunks`` batch.
    description: the ledger row's description; ``{structure}`` is the class's short name.
    check: ``check(checkpoint)`` raises if the checkpoint cannot be used (run before any baseline work).
    """

    predict: Callable
    description: str
    check: Callable = check_contact_model


HYBRID = Learned(surrogate_predict, "learned contact inside MuJoCo (hybrid stepper): {structure}")
PEER = Learned(peer_predict, "end-to-end learned step (GNS, no MuJoCo)", check_peer)
LEARNED = {
    "surrogate.model.contact_law.ContactLawGNN": HYBRID,
    "surrogate.baselines.gns.GNSNet": PEER,
    "surrogate.model.gns.GNSNet": PEER,  # its cards before it moved to surrogate.baselines
    # v1 (raw forces, removed): its check (``load_checkpoint``) refuses it with the one message that says what to do
    "surrogate.model.gnn.ContactGNN": HYBRID,
}
DEFAULT_CLASS = "surrogate.model.gnn.ContactGNN"  # a card that names no class: v1 (as ``load_checkpoint`` reads it)


def card_class(checkpoint) -> str:
    """The model class a checkpoint's card names (``model.class``)."""
    from ..model.checkpoint import CheckpointError

    path = Path(checkpoint) / "card.json"
    if not path.is_file():
        raise CheckpointError(f"{path}: no checkpoint card")
    try:
        card = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path}: corrupt card ({e})") from None
    return str((card.get("model") or {}).get("class") or DEFAULT_CLASS) if isinstance(card, dict) else DEFAULT_CLASS


def learned_for(checkpoint) -> tuple[Learned, str]:
    """(the predictor of ``checkpoint``'s model class, that class's short name)."""
    from ..model.checkpoint import CheckpointError

    name = card_class(checkpoint)
    if name not in LEARNED:
        raise CheckpointError(f"{Path(checkpoint) / 'card.json'}: model.class {name!r} has no toss predictor; "
                              f"known: {sorted(LEARNED)}")
    return LEARNED[name], name.rsplit(".", 1)[-1]
