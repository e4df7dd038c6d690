"""Assignments (paper §3.1): a parent env from the pool, how the solver did on it, a direction.

When the solver keeps failing the parent (mean reward below 0.5) the proposer is asked
for a simpler variant; when it succeeds, for a harder one (longer horizon, an extra step).
The brief also describes the solver the task is for (:class:`SolverProfile`: its model, turn
limit, tokens per turn, time limit, context, sandbox), so "simpler" and "harder" are aimed at
a known agent, and names the first step its attempts did not reach (:mod:`aes.rollout.failures`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SIMPLER, HARDER = "simpler", "harder"
WITHHELD = "withheld"
"""The direction as a no-feedback proposer's records show it (it follows from the solver's rewards)."""


@dataclass
class SolverProfile:
    """What the solver is and what an attempt of it may use, from the run's config."""

    model: str
    max_turns: int | None
    """Most turns (one shell command or tool call each) per attempt; None: no turn limit."""
    tokens_per_turn: int
    """Most tokens the solver generates in one turn (``solver.max_tokens``)."""
    context_tokens: int
    """Largest prompt + completion of one turn (``solver.context_length``)."""
    episode_tokens: int | None
    """Most prompt + completion tokens of a whole attempt; None: only the context limits it."""
    agent_timeout_sec: float
    """An attempt's time limit when task.toml gives no [agent] timeout_sec."""
    max_agent_timeout_sec: float
    """The most any task's [agent] timeout_sec is granted."""
    command_timeout_sec: float
    """Limit of one shell command."""
    observation_chars: int
    """Most characters of one command's output the solver is shown (head and tail kept)."""
    cpus: float
    """CPUs of the solver's sandbox when task.toml gives none."""
    memory_mb: int
    """Memory of the solver's sandbox when task.toml gives none."""

    @classmethod
    def from_config(cls, cfg) -> "SolverProfile":
        """The profile of ``cfg.solver`` under ``cfg.agent`` and ``cfg.sandbox`` (an :class:`AesConfig`)."""
        return cls(model=cfg.solver.model, max_turns=cfg.agent.max_turns, tokens_per_turn=cfg.solver.max_tokens,
                   context_tokens=cfg.solver.context_length, episode_tokens=cfg.agent.max_episode_tokens,
                   agent_timeout_sec=cfg.sandbox.default_agent_timeout_sec,
                   max_agent_timeout_sec=cfg.sandbox.max_agent_timeout_sec,
                   command_timeout_sec=cfg.agent.command_timeout_sec, observation_chars=cfg.agent.observation_chars,
                   cpus=cfg.sandbox.default_cpus, memory_mb=cfg.sandbox.default_memory_mb)

    def describe(self) -> str:
        """The profile as the proposer reads it (markdown lines)."""
        turns = "no turn limit" if self.max_turns is None else f"at most {self.max_turns} turns"
        budget = "" if self.episode_tokens is None else f", at most {self.episode_tokens:,} tokens in all"
        return (f"- model: {self.model}\n"
                f"- an attempt: {turns} (one shell command or tool call each){budget}; it ends when the solver "
                f"says it is done, at the task's [agent] timeout_sec ({self.agent_timeout_sec:g} s when the task "
                f"gives none; at most {self.max_agent_timeout_sec:g} s), or when its context is full\n"
                f"- each turn: at most {self.tokens_per_turn:,} generated tokens; {self.context_tokens:,} tokens of "
                f"context for the whole conversation so far\n"
                f"- each command: at most {self.command_timeout_sec:g} s; the solver sees at most "
                f"{self.observation_chars:,} characters of its output (head and tail)\n"
                f"- its sandbox: {self.cpus:g} CPU{'' if self.cpus == 1 else 's'}, {self.memory_mb / 1024:g} GiB of memory (when task.toml sets "
                f"no cpus / memory_mb; a value there replaces these)\n")


@dataclass
class Assignment:
    parent_env_id: str
    parent_name: str
    solver: str
    mean_reward: float | None
    most_common_failure: str | None
    direction: str
    round: int = 0
    assignment_id: str = ""
    group: str = ""
    """Episodes of one group share a baseline when the proposer is trained (shared policy)."""
    rollout_update: int | None = None
    """Policy version (DPPO updates applied) of the solver rollouts the statistics come from."""
    rewards: list[float | None] = field(default_factory=list)
    """The solver's rewards on the parent, one per attempt (None: the attempt got no verdict)."""
    failures: dict[str, int] = field(default_factory=dict)
    """Each failure label (the first step an attempt did not reach) and how many attempts it ended."""
    solver_profile: dict[str, Any] = field(default_factory=dict)
    """The solver the task is for (:class:`SolverProfile` as a dict); empty when unknown."""

    def to_dict(self, solver_feedback: bool = True) -> dict[str, Any]:
        """The assignment as a dict; without ``solver_feedback`` nothing of the solver's results (its
        rewards, failures and the direction they chose) is in it: what a proposer of Table 3's
        no-feedback arm may read back (its episode logs, its reflection history)."""
        data = asdict(self)
        if not solver_feedback:
            data.update(mean_reward=None, most_common_failure=None, rewards=[], failures={}, direction=WITHHELD)
        return data

    def _solver_text(self) -> str:
        if not self.solver_profile:
            return ""
        return f"\n## The solver your task is for\n\n{SolverProfile(**self.solver_profile).describe()}"

    def brief(self, solver_feedback: bool = True) -> str:
        """The assignment as the proposer reads it (without solver statistics if not ``solver_feedback``)."""
        if not solver_feedback:
            return (f"# Assignment {self.assignment_id}\n\nParent task: {self.parent_name} (its files are in "
                    f"past_environments/{self.parent_env_id}/)\n\nBuild a new related task that a capable "
                    "terminal agent would solve only sometimes.\n" + self._solver_text())
        mean = "unknown" if self.mean_reward is None else f"{self.mean_reward:.2f}"
        why = {
            SIMPLER: "The solver keeps failing it. Build a SIMPLER related task that exercises the same "
                     "skill with fewer steps or clearer requirements, aimed at the step it gets wrong.",
            HARDER: "The solver usually succeeds. Build a HARDER related task: a longer horizon or an "
                    "extra step (another transformation, an edge case, a second input).",
        }[self.direction]
        rewards = ", ".join("no verdict" if r is None else f"{r:.2f}" for r in self.rewards)
        failures = "".join(f"\n  - {label}: {n} attempt{'s' if n != 1 else ''}"
                           for label, n in sorted(self.failures.items(), key=lambda kv: -kv[1]))
        return (f"# Assignment {self.assignment_id}\n\n"
                f"Parent task: {self.parent_name} (env id {self.parent_env_id}; its files are in "
                f"past_environments/{self.parent_env_id}/)\n"
                f"Solver {self.solver}: mean reward {mean}" + (f" (attempts: {rewards})" if rewards else "") + "\n"
                f"Most common failure (the first step the attempts did not reach): "
                f"{self.most_common_failure or 'none recorded'}" + failures + "\n"
                f"(its attempts are in past_trajectories/{self.parent_env_id}/{self.solver}/)\n\n{why}\n"
                + self._solver_text())


def make_assignments(parents: list[tuple[str, str]], rows: list[dict], solver: str, round: int,
                     profile: SolverProfile | None = None) -> list[Assignment]:
    """One assignment per parent ``(env_id, name)``, directed by the solver's index row on it."""
    by_env = {r["env_id"]: r for r in rows}
    out = []
    for env_id, name in parents:
        row = by_env.get(env_id, {})
        mean = row.get("mean")
        out.append(Assignment(parent_env_id=env_id, parent_name=name, solver=solver, mean_reward=mean,
                              most_common_failure=row.get("most_common_failure"),
                              direction=SIMPLER if mean is None or mean < 0.5 else HARDER, round=round,
                              rollout_update=row.get("policy_version"), rewards=list(row.get("rewards") or []),
                              failures=dict(row.get("failures") or {}),
                              solver_profile=asdict(profile) if profile else {}))
    return out
