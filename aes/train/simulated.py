"""The trainer of the simulated flywheel: a DPPO "update" raises the scripted solver's skill.

Each update that holds groups with reward spread adds ``LEARNING_RATE`` times the fraction of
the batch's groups that had spread (a batch of flat groups teaches nothing, as in DPPO).
Proposer groups are formed exactly as for the real shared policy (one group per assignment,
r_P of the submitted env) and counted; they do not change the scripted proposer.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from aes.train.advantages import has_spread, proposer_reward
from aes.train.episodes import PROPOSER, SOLVER, Episode, Group

log = logging.getLogger(__name__)
LEARNING_RATE = 0.15


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
        spread = sum(has_spread(g.rewards) for g in solver)
        self.chat.skill += LEARNING_RATE * spread / max(1, self.cfg.trainer.envs_per_update)
        self.proposer_trained += sum(g.role == PROPOSER for g in groups)
        rewards = [r for g in solver for r in g.rewards]
        return {"reward_mean": sum(rewards) / len(rewards) if rewards else None, "skill": self.chat.skill,
                "groups_kept": len(groups), "groups_collected": collected}

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "simulated.json").write_text(json.dumps({"skill": self.chat.skill}))

    def restore(self, directory: Path) -> None:
        state = directory / "simulated.json"
        if state.exists():
            self.chat.skill = json.loads(state.read_text())["skill"]

    def close(self) -> None:
        self.chat.close()
