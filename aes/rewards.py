"""The two rewards of a solver attempt, as its trajectory's ``extra`` records them.

* the task reward, ``extra.reward``: tests passed / tests (paper §3.3). It is the attempt's
  reward everywhere: pass@k, avg@k, calibration, the rollout index, the cold start's
  ``sft.min_reward``;
* the shaped reward, ``extra.reward_shaped`` (human-in-the-loop tasks with
  ``hil.shaped_reward_weight`` > 0, paper §4.5): task reward + weight x Ask-F1. Only the DPPO
  advantage is computed from it.
"""

from __future__ import annotations

from typing import Any


def task_reward(extra: dict[str, Any]) -> float | None:
    """An attempt's task reward (``extra.reward``: the tests' verdict). Everything that scores the
    solver reads it: pass@k, avg@k, calibration, the index, the cold start's ``sft.min_reward``."""
    # trajectories written before the shaped reward had its own key kept the task reward here
    return extra.get("reward_task", extra.get("reward"))


def training_reward(extra: dict[str, Any]) -> float | None:
    """What the DPPO advantage of an attempt is computed from: the shaped reward
    (``extra.reward_shaped``: task reward + ``hil.shaped_reward_weight`` x Ask-F1) where one was
    recorded, else the task reward."""
    if extra.get("reward_shaped") is not None:
        return extra["reward_shaped"]
    return extra.get("reward")  # also older files, whose ``reward`` held the shaped value
