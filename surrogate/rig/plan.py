"""The plan of a rig run: which object, hand and physics seed each episode gets.

Episode i uses object ``i mod n_objects`` and physics seed ``SeedSequence(seed, spawn_key=(i,))``
(with ``hand="both"``: hand ``i mod 2`` and object ``(i // 2) mod n_objects``, so every object is
grasped by both hands). The plan depends on nothing else, so results do not depend on the worker
count or on scheduling.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..hand_names import CODE_HANDS, GRASPING_HANDS

HANDS = CODE_HANDS  # the two ``hand="both"`` alternates
RIG_HANDS = GRASPING_HANDS  # every hand the rig grasps with (jaco: dm_control's Kinova hand, ``scenes.jaco_hand``)


@dataclass(frozen=True)
class EpisodePlan:
    """What one episode is: its index, object, hand and seeds."""

    index: int
    object_index: int
    object_name: str
    hand: str
    seed: int
    noise_seed: int | None = None


def episode_seed(seed: int, index: int) -> int:
    """Physics seed of episode ``index`` of a run with ``seed`` (a 63-bit int from SeedSequence)."""
    state = np.random.SeedSequence(int(seed), spawn_key=(int(index),)).generate_state(1, np.uint64)[0]
    return int(state >> np.uint64(1))


def plan_episodes(object_names: list, episodes: int, *, seed: int, hand: str, noise_seed=None) -> list:
    """[episodes] EpisodePlan in index order (see the module docstring for the rule)."""
    n = len(object_names)
    plans = []
    for i in range(int(episodes)):
        if hand == "both":
            h, o = HANDS[i % 2], (i // 2) % n
        else:
            h, o = hand, i % n
        plans.append(EpisodePlan(i, o, object_names[o], h, episode_seed(seed, i), noise_seed))
    return plans
