"""Assignments (paper §3.1): a parent env from the pool, how the solver did on it, a direction.

When the solver keeps failing the parent (mean reward below 0.5) the proposer is asked
for a simpler variant; when it succeeds, for a harder one (longer horizon, an extra step).
Parents are taken in turn, least-used first, so every pool env gets children.
"""

from __future__ import annotations

import random
from collections import Counter
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


def make_assignments(index_rows: list[dict], n: int, round: int, seed: int,
                     used: Counter | None = None) -> list[Assignment]:
    """``n`` assignments from the index rows of pool envs (one solver's rows)."""
    if not index_rows:
        return []
    used = used if used is not None else Counter()
    rng = random.Random(seed * 1_000_003 + round)
    rows = list(index_rows)
    rng.shuffle(rows)
    out = []
    for _ in range(n):
        row = min(rows, key=lambda r: used[r["env_id"]])
        used[row["env_id"]] += 1
        mean = row.get("mean")
        direction = SIMPLER if mean is None or mean < 0.5 else HARDER
        out.append(Assignment(parent_env_id=row["env_id"], parent_name=row["task"], solver=row["solver"],
                              mean_reward=mean, most_common_failure=row.get("most_common_failure"),
                              direction=direction, round=round))
    return out
