"""The trajectory index: one row per (env, solver) with rewards and the most common failure."""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_PYTEST_FAILED = re.compile(r"^(?:FAILED|ERROR) (?:\S+::)?(\S+?)(?: - |\s*$)", re.MULTILINE)
PASS = 1.0


def failed_tests(verifier_output: str) -> list[str]:
    """Names of failing tests in pytest's short summary (``FAILED file::test - msg``)."""
    return _PYTEST_FAILED.findall(verifier_output or "")


def failure_signature(reward: float | None, outcome: str, end_reason: str | None,
                      verifier_output: str) -> str | None:
    """A short label of why an attempt fell short; None when it scored full reward."""
    if reward is not None and reward >= PASS:
        return None
    if outcome not in ("ok", "agent_timeout"):
        return f"trial {outcome}"
    tests = failed_tests(verifier_output)
    what = f"{tests[0]} failed" if tests else "tests failed"
    return f"{what} (agent: {end_reason})" if end_reason else what


@dataclass
class AttemptRecord:
    """One solver attempt on one env, as the index and calibration see it."""

    env_id: str
    solver: str
    attempt: int
    reward: float | None
    outcome: str
    end_reason: str | None = None
    failure: str | None = None
    path: str | None = None


@dataclass
class IndexRow:
    """Everything the proposer needs to know about the solver on one env."""

    env_id: str
    task: str
    solver: str
    attempts: int
    rewards: list[float | None]
    mean: float | None
    std: float | None
    most_common_failure: str | None
    failures: dict[str, int] = field(default_factory=dict)
    end_reasons: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    """Attempts without a reward (sandbox or verifier errors); they are left out of mean/std."""

    @classmethod
    def from_attempts(cls, env_id: str, task: str, solver: str, records: list[AttemptRecord]) -> "IndexRow":
        records = sorted(records, key=lambda r: r.attempt)
        scored = [r.reward for r in records if r.reward is not None]
        failures = Counter(r.failure for r in records if r.failure)
        return cls(
            env_id=env_id, task=task, solver=solver, attempts=len(records),
            rewards=[r.reward for r in records],
            mean=statistics.fmean(scored) if scored else None,
            std=statistics.pstdev(scored) if scored else None,
            most_common_failure=failures.most_common(1)[0][0] if failures else None,
            failures=dict(failures),
            end_reasons=dict(Counter(r.end_reason for r in records if r.end_reason)),
            errors=len(records) - len(scored),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def write_index(path: Path, rows: list[IndexRow]) -> None:
    """Rewrite ``index.jsonl`` atomically, one row per (env, solver)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in sorted(rows, key=lambda r: (r.env_id, r.solver))))
    tmp.replace(path)


def read_index(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
