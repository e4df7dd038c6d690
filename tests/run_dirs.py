"""Run dirs to test reports against, without running a model.

``embedded_run`` rebuilds the run dir of the embedded default (``python -m aes.run``: SmolLM2 as
proposer and solver, one round) from ``tests/fixtures/runs/embedded/``: its metrics rows, config,
rollout index, solver attempts and the proposer's one episode, copied from a real run (token ids
and log-probs shortened), plus its pool: the 15 seed tasks admitted and the episode's assignment,
closed as broken (the proposer wrote no task files). ``synthetic_run`` writes metrics of a long
run (hundreds of rounds) for the plots.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from pathlib import Path

from aes.domains import seeds_dir
from aes.pool import PoolStore
from aes.tasks import find_tasks, load_task

from tests.conftest import REPO

EMBEDDED = REPO / "tests" / "fixtures" / "runs" / "embedded"
EPISODE = "a000-605babd3"


def seed_pool(run_dir: Path) -> PoolStore:
    """The domain's seed tasks, admitted as seeds (as ``seed_pool`` of a run does)."""
    from aes.config import DomainConfig

    pool = PoolStore(run_dir / "pool")
    for path in find_tasks([seeds_dir(DomainConfig())]):
        pool.add(path, name=load_task(path).name, status="admitted", source="seed")
    return pool


def embedded_run(dst: Path) -> Path:
    shutil.copytree(EMBEDDED, dst)
    pool = seed_pool(dst)
    spec = json.loads((dst / "proposer" / "proposer_trajectories" / f"{EPISODE}.json").read_text())["extra"]["assignment"]
    now = time.time()
    with pool._tx() as db:
        db.execute("INSERT INTO assignments (assignment_id, round, parent_id, spec, status, result_env_id, outcome,"
                   " cost_usd, tokens, created_at, updated_at) VALUES (?, 0, ?, ?, 'closed', NULL, 'broken', 0, 4791, ?, ?)",
                   (EPISODE, spec["parent_env_id"], json.dumps({**spec, "assignment_id": ""}), now, now))
    return dst


def synthetic_run(dst: Path, rounds: int, steps_per_round: int = 2) -> Path:
    """metrics.jsonl of ``rounds`` rounds (one update per step, a refresh every 8 updates) and the seed pool."""
    dst.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    rows, t, update = [], 1.79e9, 0
    for r in range(1, rounds + 1):
        for _ in range(steps_per_round):
            update += 1
            t += 30
            skill = 1 / (1 + math.exp(-(update - rounds) / (rounds / 3 + 1)))
            rows.append({"time": t, "event": "update", "step": update, "round": r, "update": update,
                         "solver_reward_mean": min(1.0, max(0.0, skill + rng.gauss(0, 0.08))),
                         "dppo/masked_fraction": abs(rng.gauss(0.001, 0.0005))})
            if update % 8 == 0:
                rows.append({"time": t, "event": "refresh", "update": update, "step": update, "pool": 40,
                             "left_band": rng.randint(0, 6), "retired": rng.randint(0, 4), "replacements": 2})
        t += 5
        episodes = 4
        valid = rng.randint(0, episodes)
        rows.append({"time": t, "event": "round", "round": r, "step": update, "updates": update,
                     "assignments/rollout_update": update - steps_per_round, "assignments/count": 2,
                     "valid_env_rate": valid / episodes, "admitted": rng.randint(0, valid),
                     "cost_per_valid_env": (0.4 + rng.random()) if valid else None,
                     "tokens_per_valid_env": 20000.0 if valid else None,
                     "failures_by_stage": {"oracle": episodes - valid} if valid < episodes else {},
                     "episodes": episodes, "pool_size": 15 + r, "solver_reward_mean": 0.5,
                     "dppo/masked_fraction": 0.001, "cost_usd": 0.5 * r, "tokens": 30000 * r})
    (dst / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    seed_pool(dst)
    return dst

