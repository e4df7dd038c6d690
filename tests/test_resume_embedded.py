"""Ctrl-C in a real run, then ``resume=RUN_DIR``: the embedded default (``python -m aes.run``: the
local GGUF model proposes and solves, Docker trials, a DPPO update through DeepSpeed), stopped once
during its proposer episode and once during its solver rollouts, resumed after each. The three
sessions together must leave what one uninterrupted run leaves: one round, one update, the round's
episode counted once, every token the sessions spent, no duplicate row. Two sizes are smaller than the
default's, to keep the test short: one parent attempt, and a 45-second proposer budget (the episode
runs in full once, in the second session)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aes.pool import AssignmentLog, PoolStore
from aes.report.metrics import read_metrics, row_key
from aes.spend import read_spend
from tests.conftest import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SMALLER = ["flywheel.parent_attempts=1", "harness.episode_timeout_sec=45"]


def _session(run_dir: Path, args: list[str], out: Path, stop_when: str | None) -> tuple[int, str, float | None]:
    """One ``python -m aes.run`` session; with ``stop_when``, Ctrl-C as soon as run.log shows that text.
    Returns its exit status, its output and the seconds from the signal to its exit."""
    log = run_dir / "run.log"
    seen = log.read_text(errors="replace") if log.is_file() else ""
    with open(out, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "aes.run", *args], cwd=REPO, stdout=fh, stderr=subprocess.STDOUT)
    stopped = None
    try:
        if stop_when:
            deadline = time.monotonic() + 2400
            while proc.poll() is None and time.monotonic() < deadline:
                if log.is_file() and stop_when in log.read_text(errors="replace")[len(seen):]:
                    proc.send_signal(signal.SIGINT)
                    stopped = time.monotonic()
                    break
                time.sleep(0.5)
        proc.wait(timeout=2400)
    finally:
        if proc.poll() is None:
            proc.kill()
    took = time.monotonic() - stopped if stopped else None
    return proc.returncode, out.read_text(errors="replace"), took


def _stopped_cleanly(status: int, output: str, run_dir: Path) -> None:
    assert status == 130, output[-4000:]
    assert "Traceback" not in output, output[-4000:]
    [line] = [line for line in output.splitlines() if "resume with:" in line]
    assert f"python -m aes.run resume={run_dir.resolve()}" in line


def test_ctrl_c_in_the_proposer_episode_and_in_the_rollouts_then_resume(sandbox, tmp_path):
    run_dir = tmp_path / "run"
    spent = []

    # 1. stopped while the proposer's episode runs
    status, output, took = _session(run_dir, [f"hydra.run.dir={run_dir}", *SMALLER], tmp_path / "1.out", "episode started")
    assert took is not None, "the episode never started: " + output[-3000:]
    print(f"stop during the proposer episode: the process ended {took:.1f} s after Ctrl-C")
    _stopped_cleanly(status, output, run_dir)
    spent.append(read_spend(run_dir / "spend.json"))
    assert spent[-1]["tokens"] > 0  # the episode had called the model
    pool = PoolStore(run_dir / "pool")
    [assignment] = AssignmentLog(pool).rows()
    if assignment["status"] == "open":  # cut short at a model call: set aside, unscored
        [aside] = (run_dir / "proposer" / "infrastructure_failures").glob("*.json")
        assert json.loads(aside.read_text())["extra"]["infrastructure_error"] == "stopped by Ctrl-C (SIGINT)"
    else:  # it ended by itself (its time limit) before its next model call: a finished episode
        assert assignment["result"] is not None
    assert not [r for r in read_metrics(run_dir / "metrics.jsonl") if r["event"] in ("round", "update")]

    # 2. resumed, and stopped again while the solver's training attempts run
    status, output, took = _session(run_dir, [f"resume={run_dir}"], tmp_path / "2.out", "-train]: ")
    assert took is not None, "the training rollouts never started: " + output[-3000:]
    print(f"stop during the solver rollouts: the process ended {took:.1f} s after Ctrl-C")
    _stopped_cleanly(status, output, run_dir)
    spent.append(read_spend(run_dir / "spend.json"))
    assert spent[-1]["tokens"] >= spent[-2]["tokens"] and spent[-1]["model_calls"] > spent[-2]["model_calls"]
    assert [r for r in AssignmentLog(pool).rows() if r["status"] == "closed"]  # the episode is done and kept
    train = {p: p.stat().st_mtime_ns for p in (run_dir / "trajectories").rglob("*.json")
             if "-train" in str(p) and "/infra/" not in str(p)}

    # 3. resumed to the end
    status, output, _ = _session(run_dir, [f"resume={run_dir}"], tmp_path / "3.out", None)
    assert status == 0, output[-4000:]
    assert "Traceback" not in output
    rows = read_metrics(run_dir / "metrics.jsonl")
    keys = [row_key(r) for r in rows if row_key(r)]
    assert len(keys) == len(set(keys))  # no duplicate row
    [round_row] = [r for r in rows if r["event"] == "round"]
    assert len([r for r in rows if r["event"] in ("update", "no_update")]) == 1
    # the round counts its one episode (whichever session ran it), and every token of the three sessions
    assert round_row["episodes"] == 1 and round_row["valid_env_rate"] is not None
    final = read_spend(run_dir / "spend.json")
    assert round_row["tokens"] == final["tokens"] > spent[-1]["tokens"] and round_row["cost_usd"] == final["cost_usd"]
    assert all(r["status"] == "closed" and r["result"] for r in AssignmentLog(pool).rows())
    # the training attempts finished before the stop were kept, not run again
    assert {p: p.stat().st_mtime_ns for p in train} == train
    report = (run_dir / "report.html").read_text()
    assert f"Model calls so far: {final['model_calls']} calls, {final['tokens']:,} tokens" in report
    assert f"report: {run_dir / 'report.html'}" in output
