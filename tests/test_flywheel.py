"""The whole loop end to end with the tiny model in Docker, and resuming after kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from aes.pool import PoolStore
from aes.report.metrics import read_metrics
from tests.conftest import FIXTURES, REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SEEDS = FIXTURES.parent / "flywheel_seeds"


def command(run_dir, *extra):
    # 8 coin flips per group: a group without reward spread has probability 2/256
    return [sys.executable, "-m", "aes.run", "experiment=smoke", f"domain.seeds={SEEDS}",
            "trainer.attempts_per_env=8", f"hydra.run.dir={run_dir}", *extra]


def aes_containers_of_dead_owners(sandbox) -> list:
    from aes.sandbox.docker_client import _owner_alive

    return [c for c in sandbox.client.api.containers(all=True, filters={"label": "aes.managed=true"})
            if not _owner_alive(c["Labels"])]


def test_smoke_run_updates_and_records(sandbox, tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run(command(run_dir), capture_output=True, text=True, cwd=REPO, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = read_metrics(run_dir / "metrics.jsonl")
    [update] = [r for r in rows if r["event"] == "update"]
    assert update["dppo/groups_kept"] >= 1 and update["dppo/masked_fraction"] is not None
    [round_row] = [r for r in rows if r["event"] == "round"]
    for key in ("valid_env_rate", "valid", "accepted", "calibrated", "entered_pool", "pool_size", "solver_reward_mean",
                "dppo/masked_fraction", "cost_usd", "tokens"):
        assert key in round_row
    report = (run_dir / "report.html").read_text()
    for plot in ("Valid-env rate per round", "Pool size and admissions per round", "Solver reward per update"):
        assert plot in report
    assert report.count("<img") >= 5  # a plot without data is a sentence saying why
    assert any(k.startswith("seconds/") for k in round_row)
    assert (run_dir / "config.yaml").exists() and any((run_dir / "checkpoints").iterdir())
    assert (run_dir / "trajectories" / "index.jsonl").exists()


def test_resume_after_kill_loses_and_duplicates_nothing(sandbox, tmp_path):
    run_dir = tmp_path / "run"
    cmd = command(run_dir, "flywheel.rounds=2")
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while time.time() < deadline:  # kill once attempts are being written, mid-rollout
        if len(list((run_dir / "trajectories").rglob("*.json"))) >= 2:
            break
        time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {e.env_id for e in PoolStore(run_dir / "pool").envs("admitted")}

    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    pool = PoolStore(run_dir / "pool")
    assert pool.check() == []
    hashes = [e.content_hash for e in pool.envs()]
    assert len(hashes) == len(set(hashes))
    assert before <= {e.env_id for e in pool.envs("admitted")}
    rounds = sorted({r["round"] for r in read_metrics(run_dir / "metrics.jsonl") if r["event"] == "round"})
    assert rounds == [1, 2]
    assert pool.get_meta("flywheel.round") == 2
    killed = f"aes.pid={proc.pid}"  # the killed run's containers (another test's may come and go meanwhile)
    assert [c for c in aes_containers_of_dead_owners(sandbox) if f"aes.pid={c['Labels'].get('aes.pid')}" == killed] == []
    attempts = [json.loads(p.read_text())["extra"]["attempt"] for p in (run_dir / "trajectories").rglob("[0-9]*.json")]
    assert attempts  # trajectories written before the kill were kept and reused


def test_train_mode_updates_from_stored_rollouts(sandbox, tmp_path):
    rollout = subprocess.run([sys.executable, "-m", "aes.run", "mode=rollout", "solver=tiny", f"tasks={SEEDS}",
                              "attempts=12", "agent.max_turns=2", f"hydra.run.dir={tmp_path / 'r'}"],
                             capture_output=True, text=True, cwd=REPO, timeout=900)
    assert rollout.returncode == 0, rollout.stderr[-2000:]
    train = subprocess.run([sys.executable, "-m", "aes.run", "mode=train", "solver=tiny", "trainer.envs_per_update=2",
                            f"trajectories={tmp_path / 'r' / 'trajectories'}", f"hydra.run.dir={tmp_path / 't'}"],
                           capture_output=True, text=True, cwd=REPO, timeout=900)
    assert train.returncode == 0, train.stdout[-2000:] + train.stderr[-2000:]
    [update] = [r for r in read_metrics(tmp_path / "t" / "metrics.jsonl") if r["event"] == "update"]
    assert update["dppo/groups_kept"] == 2 and (tmp_path / "t" / "checkpoints").is_dir()


def test_carried_rollouts_go_on_under_the_new_policy(sandbox, tmp_path):
    """With flywheel.carry_unfinished an update starts once enough groups are complete; attempts
    still running are carried into the next update, each turn recording the policy that served it."""
    run_dir = tmp_path / "run"
    cmd = command(run_dir, "flywheel.carry_unfinished=true", "flywheel.proposer_interval=3",
                  "flywheel.assignments_per_round=0", "trainer.envs_per_update=1")  # 2 seed envs: 1 is carried
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    steps = [r for r in read_metrics(run_dir / "metrics.jsonl") if r["event"] in ("update", "no_update")]
    assert len(steps) == 3 and any(r["rollouts/carried"] > 0 for r in steps)
    spans = []
    for path in (run_dir / "trajectories").rglob("[0-9]*.json"):
        steps_ = [s for s in json.loads(path.read_text())["steps"] if s["source"] == "agent"]
        versions = [s["extra"]["policy_version"] for s in steps_]
        assert versions == sorted(versions)  # a carried attempt only moves forward in policy
        spans.append(versions[-1] - versions[0] if versions else 0)
    assert spans and max(spans) <= 2  # flywheel.carry_max_updates (an attempt spanning an update: tests/test_carried.py)
