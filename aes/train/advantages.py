"""Group advantages, dynamic batch assembly and the proposer reward (paper §3.3, App. G.1).

- Advantage of an episode: its reward minus the mean reward of its group, with no division
  by the group's standard deviation. Every training token of the episode carries it.
- Groups whose rewards do not vary carry no signal (all advantages are 0): the batcher
  drops them and keeps drawing groups until the batch holds the configured number (DAPO's
  dynamic sampling); it records how many it collected and kept.
- Shared policy: proposer groups (episodes for the same assignment) are centred on their
  own mean, never mixed with solver groups; the proposer reward r_P is 0 for a broken
  environment, ``partial`` for a valid one that was not admitted, 1 for an admitted one.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from aes.train.episodes import Group, Sample

SPREAD_EPS = 1e-6
"""Rewards closer than this count as equal (a flat group)."""

BROKEN, VALID, ADMITTED = "broken", "valid", "admitted"
"""Admission outcomes of a proposed environment: failed a validity check (static, build,
oracle, no-op, review), valid but outside the calibration band, admitted to the pool."""


def group_advantages(rewards: Sequence[float]) -> list[float]:
    """``reward - mean(rewards)`` for each reward (no std division)."""
    if not rewards:
        return []
    mean = statistics.fmean(rewards)
    return [r - mean for r in rewards]


def has_spread(rewards: Sequence[float], eps: float = SPREAD_EPS) -> bool:
    """Whether the rewards of a group vary (a flat group has all-zero advantages)."""
    return len(rewards) >= 2 and max(rewards) - min(rewards) > eps


def proposer_reward(outcome: str, partial: float) -> float:
    """r_P for an admission outcome: broken 0, valid-not-admitted ``partial``, admitted 1."""
    rewards = {BROKEN: 0.0, VALID: float(partial), ADMITTED: 1.0}
    if outcome not in rewards:
        raise ValueError(f"unknown admission outcome {outcome!r}; use one of {', '.join(rewards)}")
    return rewards[outcome]


def admission_outcome(valid: bool, admitted: bool) -> str:
    """The outcome of a validation verdict (checks 1-4 and review) and a calibration verdict."""
    if admitted and not valid:
        raise ValueError("an environment cannot be admitted without passing validation")
    return ADMITTED if admitted else VALID if valid else BROKEN


def advantage_samples(groups: Iterable[Group]) -> list[Sample]:
    """Every sample of every group with its episode's advantage set (groups stay separate)."""
    samples: list[Sample] = []
    for group in groups:
        for episode, advantage in zip(group.episodes, group_advantages(group.rewards)):
            for sample in episode.samples:
                sample.advantage = advantage
                samples.append(sample)
    return samples


@dataclass
class Batch:
    """The groups of one update and how they were collected."""

    groups: list[Group] = field(default_factory=list)
    collected: int = 0
    """Groups drawn from the stream, flat ones included."""
    target: int = 0
    """Groups the batch should hold."""

    @property
    def kept(self) -> int:
        return len(self.groups)

    @property
    def full(self) -> bool:
        return self.kept >= self.target

    def stats(self) -> dict[str, float]:
        """kept/collected groups and reward mean/std, overall and per role."""
        stats = {"groups_kept": float(self.kept), "groups_collected": float(self.collected),
                 "groups_kept_fraction": self.kept / self.collected if self.collected else 0.0}
        roles = sorted({g.role for g in self.groups})
        for role in [None, *roles] if len(roles) > 1 else [None]:
            rewards = [r for g in self.groups if role in (None, g.role) for r in g.rewards]
            prefix = "reward" if role is None else f"{role}/reward"
            if rewards:
                stats[f"{prefix}_mean"] = statistics.fmean(rewards)
                stats[f"{prefix}_std"] = statistics.pstdev(rewards)
        return stats


class GroupBatcher:
    """Fills batches of ``num_groups`` groups with varying rewards from a stream of groups.

    Pass an iterator to :meth:`fill` to keep the groups it did not read for the next batch.
    """

    def __init__(self, num_groups: int, eps: float = SPREAD_EPS):
        if num_groups < 1:
            raise ValueError("num_groups must be >= 1 (trainer.envs_per_update)")
        self.num_groups = num_groups
        self.eps = eps
        self.collected_total = 0
        self.kept_total = 0

    def fill(self, stream: Iterable[Group]) -> Batch:
        """Draw groups until ``num_groups`` are kept or the stream ends (then ``batch.full`` is False)."""
        batch = Batch(target=self.num_groups)
        if batch.full:
            return batch
        for group in stream:
            batch.collected += 1
            if has_spread(group.rewards, self.eps):
                batch.groups.append(group)
                if batch.full:
                    break
        self.collected_total += batch.collected
        self.kept_total += batch.kept
        return batch
