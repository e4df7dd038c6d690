"""The trainer of the simulated flywheel: a DPPO "update" moves the scripted solver's skill.

The solver's only weight is its skill ``s``; on an env of difficulty ``d`` an attempt passes each
of the sandbox's ``TESTS`` tests with probability ``p = sigmoid(2 (s - d))`` (aes/sandbox/simulated.py),
so the score of an attempt that passed ``k = TESTS x r`` of them is
``d/ds log P(k) = 2 (k - TESTS p)``. An update is one policy-gradient step on that weight with the
groups' advantages (:func:`aes.train.advantages.group_advantages`, as DPPO takes them):
``s += LEARNING_RATE x sum over groups of mean_i(A_i x 2 TESTS (r_i - mean r)) / envs_per_update``
(``p`` is shared by a group's attempts, so the group's mean reward stands in for ``TESTS p``: the
terms differ by ``p x sum_i A_i``, 0 for centred advantages). Flat groups (all advantages 0), an empty
batch, or advantages of the wrong sign teach nothing or unlearn; groups with reward spread teach
in proportion to their variance.
Proposer groups are formed exactly as for the real shared policy (one group per assignment,
r_P of the submitted env) and counted; they do not change the scripted proposer.
"""

from __future__ import annotations

import json
import logging
import statistics
from pathlib import Path

from aes.sandbox.simulated import TESTS
from aes.train.advantages import group_advantages, has_spread, proposer_reward
from aes.train.episodes import PROPOSER, SOLVER, Episode, Group

log = logging.getLogger(__name__)
LEARNING_RATE = 0.3
"""A full batch of groups at the band's centre (p = 0.5, reward variance 1/16) moves the skill by 0.15."""


def skill_gradient(group: Group) -> float:
    """The group's mean of advantage x score (see the module docstring)."""
    rewards = group.rewards
    if not rewards:
        return 0.0
    mean = statistics.fmean(rewards)
    return statistics.fmean(a * 2 * TESTS * (r - mean) for a, r in zip(group_advantages(rewards), rewards))


class SimulatedSolver:
    """The :class:`~aes.train.policy.TrainableSolver` interface over a scripted model."""

    def __init__(self, cfg, chat):
        self.cfg, self.chat = cfg, chat
        self.proposer_trained = 0

    def prepare(self) -> None:
        """Nothing to build ahead of the first update."""

    def groups_of(self, rollouts: dict) -> list:
        return [Group(env_id, [Episode([], r.reward, r.path or "") for r in env.records if r.reward is not None],
                      SOLVER, {"env_id": env_id}) for env_id, env in rollouts.items() if env.records]

    def proposer_groups(self, trajectories: Path, round: int) -> list:
        groups: dict[str, list] = {}
        for path in sorted(trajectories.glob("*.json")):
            extra = json.loads(path.read_text()).get("extra") or {}
            assignment = extra.get("assignment") or {}
            if assignment.get("round") != round:
                continue
            reward = proposer_reward(extra.get("outcome", "broken"), self.cfg.trainer.proposer_partial_reward)
            groups.setdefault(assignment.get("group") or "", []).append(Episode([], reward, str(path)))
        return [Group(key, eps, PROPOSER) for key, eps in groups.items() if has_spread([e.reward for e in eps])]

    def update(self, groups: list, collected: int) -> dict:
        solver = [g for g in groups if g.role == SOLVER]
        gain = LEARNING_RATE * sum(skill_gradient(g) for g in solver) / max(1, self.cfg.trainer.envs_per_update)
        self.chat.skill += gain
        self.proposer_trained += sum(g.role == PROPOSER for g in groups)
        rewards = [r for g in solver for r in g.rewards]
        return {"reward_mean": sum(rewards) / len(rewards) if rewards else None, "skill": self.chat.skill,
                "skill_gain": gain, "groups_kept": len(groups), "groups_collected": collected}

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "simulated.json").write_text(json.dumps({"skill": self.chat.skill}))

    def restore(self, directory: Path) -> None:
        state = directory / "simulated.json"
        if state.exists():
            self.chat.skill = json.loads(state.read_text())["skill"]

    def close(self) -> None:
        self.chat.close()
