"""Assignments (paper §3.1): a parent env from the pool, how the solver did on it, a direction.

When the solver keeps failing the parent (mean reward below 0.5) the proposer is asked
for a simpler variant; when it succeeds, for a harder one (longer horizon, an extra step).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

SIMPLER, HARDER = "simpler", "harder"


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def brief(self, solver_feedback: bool = True) -> str:
        """The assignment as the proposer reads it (without solver statistics if not ``solver_feedback``)."""
        if not solver_feedback:
            return (f"# Assignment {self.assignment_id}\n\nParent task: {self.parent_name} (its files are in "
                    f"past_environments/{self.parent_env_id}/)\n\nBuild a new related task that a capable "
                    "terminal agent would solve only sometimes.\n")
        mean = "unknown" if self.mean_reward is None else f"{self.mean_reward:.2f}"
        why = {
            SIMPLER: "The solver keeps failing it. Build a SIMPLER related task that exercises the same "
                     "skill with fewer steps or clearer requirements, aimed at the step it gets wrong.",
            HARDER: "The solver usually succeeds. Build a HARDER related task: a longer horizon or an "
                    "extra step (another transformation, an edge case, a second input).",
        }[self.direction]
        return (f"# Assignment {self.assignment_id}\n\n"
                f"Parent task: {self.parent_name} (env id {self.parent_env_id}; its files are in "
                f"past_environments/{self.parent_env_id}/)\n"
                f"Solver {self.solver}: mean reward {mean}; most common failure: "
                f"{self.most_common_failure or 'none recorded'}\n"
                f"(its attempts are in past_trajectories/{self.parent_env_id}/{self.solver}/)\n\n{why}\n")


def make_assignments(parents: list[tuple[str, str]], rows: list[dict], solver: str, round: int) -> list[Assignment]:
    """One assignment per parent ``(env_id, name)``, directed by the solver's index row on it."""
    by_env = {r["env_id"]: r for r in rows}
    out = []
    for env_id, name in parents:
        row = by_env.get(env_id, {})
        mean = row.get("mean")
        out.append(Assignment(parent_env_id=env_id, parent_name=name, solver=solver, mean_reward=mean,
                              most_common_failure=row.get("most_common_failure"),
                              direction=SIMPLER if mean is None or mean < 0.5 else HARDER, round=round,
                              rollout_update=row.get("policy_version")))
    return out
