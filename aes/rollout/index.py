"""The one record of rollouts: ``trajectories/index.jsonl``, a row per (env, solver, batch).

Every solver attempt of a run — initial rollouts, calibration, training, refresh, probes of
the proposer's assignments — is one file under ``trajectories/`` and counted in one row of
this index with the policy version (DPPO updates applied) that produced it. "The solver's
rollouts on an env" means the rows of the newest policy version (:func:`latest_rows`):
assignments, proposer workspaces and the order of training envs read those.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aes.rollout.failures import failure_label

failure_signature = failure_label
"""A short label of the first step an attempt did not reach (:mod:`aes.rollout.failures`)."""


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
    batch: str = ""
    """Which batch of rollouts (``u0003-train``, ``u0016-refresh``; empty for a plain rollout)."""
    policy_version: int = 0
    """DPPO updates applied to the solver when these attempts ran."""
    paths: list[str] = field(default_factory=list)
    """Trajectory files of the attempts, relative to ``trajectories/``."""

    @classmethod
    def from_attempts(cls, env_id: str, task: str, solver: str, records: list[AttemptRecord],
                      batch: str = "", policy_version: int = 0, root: Path | None = None) -> "IndexRow":
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
            batch=batch, policy_version=policy_version,
            paths=[_relative(r.path, root) for r in records if r.path],
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _relative(path: str, root: Path | None) -> str:
    if root is None:
        return path
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path


def row_key(row: dict[str, Any]) -> tuple[str, str, str]:
    return row["env_id"], row["solver"], row.get("batch", "")


def write_index(path: Path, rows: list[IndexRow]) -> None:
    """Rewrite ``index.jsonl`` atomically, one row per (env, solver, batch)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(r.to_dict()) + "\n"
                           for r in sorted(rows, key=lambda r: (r.env_id, r.solver, r.policy_version, r.batch))))
    tmp.replace(path)


def read_index(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def latest_rows(rows: list[dict[str, Any]], solver: str) -> dict[str, dict[str, Any]]:
    """Per env, the solver's rollouts of the newest policy version that has any, merged into one
    row (rewards, mean, std, most common failure, paths; ``policy_version`` says which)."""
    newest: dict[str, int] = {}
    for row in rows:
        if row["solver"] == solver:
            newest[row["env_id"]] = max(newest.get(row["env_id"], -1), int(row.get("policy_version", 0)))
    merged: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["solver"] != solver or int(row.get("policy_version", 0)) != newest[row["env_id"]]:
            continue
        into = merged.setdefault(row["env_id"], {**row, "rewards": [], "failures": {}, "paths": [], "attempts": 0,
                                                 "errors": 0, "batches": []})
        into["rewards"] += row.get("rewards", [])
        into["paths"] += row.get("paths", [])
        into["attempts"] += row.get("attempts", 0)
        into["errors"] += row.get("errors", 0)
        into["batches"].append(row.get("batch", ""))
        for failure, n in (row.get("failures") or {}).items():
            into["failures"][failure] = into["failures"].get(failure, 0) + n
    for row in merged.values():
        scored = [r for r in row["rewards"] if r is not None]
        row["mean"] = statistics.fmean(scored) if scored else None
        row["std"] = statistics.pstdev(scored) if scored else None
        row["most_common_failure"] = (max(row["failures"].items(), key=lambda kv: kv[1])[0]
                                      if row["failures"] else None)
    return merged
