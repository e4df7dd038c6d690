"""Benchmark evaluation: k attempts per task, avg@k and pass@k (the paper reports avg@5)."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field

from aes.rewards import task_reward
from aes.rollout.runner import RolloutRunner
from aes.tasks import Task


@dataclass
class TaskScore:
    env_id: str
    task: str
    rewards: list[float | None]
    mean: float
    passed: bool
    """At least one attempt scored full reward (1.0)."""
    error: str | None = None
    success_rate: float = 0.0
    """Share of the k attempts at full reward (binary success; a missing reward is a failure)."""


@dataclass
class EvalReport:
    k: int
    avg_at_k: float
    """Mean over tasks of the mean reward of the k attempts (missing rewards count as 0)."""
    pass_at_k: float
    """Share of tasks with at least one attempt at full reward."""
    success_rate: float = 0.0
    """Binary success beside avg@k: mean over tasks of the share of their attempts at full reward (1.0;
    missing rewards count as failures)."""
    tasks: list[TaskScore] = field(default_factory=list)
    hil: dict | None = None
    """Human-in-the-loop tasks: the setting, mean task reward, success rate, Ask-F1, precision, recall
    and ask rate (None: no HiL task)."""

    def to_dict(self) -> dict:
        return asdict(self)


def evaluate(rollouts: RolloutRunner, tasks: list[Task], k: int, show_progress: bool = True) -> EvalReport:
    envs = rollouts.run(tasks, k, show_progress=show_progress, label="eval")
    scores = []
    for env in envs.values():
        rewards = [r.reward for r in sorted(env.records, key=lambda r: r.attempt)]
        filled = [r if r is not None else 0.0 for r in rewards] or [0.0]
        scores.append(TaskScore(env.env_id, env.task.name, rewards, statistics.fmean(filled),
                                any(r is not None and r >= 1.0 for r in rewards), env.build_error,
                                _success_rate(rewards or [None])))
    return EvalReport(
        k=k,
        avg_at_k=statistics.fmean(s.mean for s in scores) if scores else 0.0,
        pass_at_k=statistics.fmean(float(s.passed) for s in scores) if scores else 0.0,
        success_rate=statistics.fmean(s.success_rate for s in scores) if scores else 0.0,
        tasks=scores,
        hil=_hil(envs),
    )


def _success_rate(rewards: list[float | None]) -> float:
    return statistics.fmean(float(r is not None and r >= 1.0) for r in rewards) if rewards else 0.0


def _hil(envs) -> dict | None:
    """Table 4/5's columns over the attempts of human-in-the-loop tasks."""
    import json
    from pathlib import Path

    from aes.hil.metrics import summarize

    scores, rewards, setting = [], [], None
    for env in envs.values():
        for record in env.records:
            extra = json.loads(Path(record.path).read_text()).get("extra", {}) if record.path else {}
            if extra.get("hil"):
                scores.append(extra["hil"])
                setting = extra["hil"]["setting"]
                rewards.append(task_reward(extra) or 0.0)
    if not scores:
        return None
    return {"setting": setting, "mean_reward": statistics.fmean(rewards), "success_rate": _success_rate(rewards),
            **summarize(scores)}
