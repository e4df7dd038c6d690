"""Rollouts: trajectory files, the index, resuming; calibration and eval on top of them."""

from __future__ import annotations

import json

import pytest

from aes.calibration import ADMIT, TOO_HARD, Calibrator
from aes.config import AgentConfig, CalibrationConfig
from aes.rollout import RolloutRunner, failure_signature, read_index
from aes.rollout.evaluate import evaluate
from aes.sandbox import TrialRunner
from aes.tasks import load_task
from tests.conftest import make_task
from tests.test_agent import Scripted, reply

SOLVE = reply("```bash\necho 42 > /app/answer.txt\n```")
GIVE_UP = reply("DONE")


def test_failure_signature_reads_pytest_summary():
    out = "FAILED test_outputs.py::test_top_ips - assert [] == ['a']\nFAILED test_outputs.py::test_x\n"
    assert failure_signature(0.5, "ok", "done", out) == "test_top_ips failed (agent: done)"
    assert failure_signature(1.0, "ok", "done", out) is None
    assert failure_signature(None, "verifier_timeout", "done", "") == "trial verifier_timeout"
    assert failure_signature(0.0, "ok", "max_turns", "") == "tests failed (agent: max_turns)"


def runner_for(model, sandbox, cfg, tmp_path, name="scripted"):
    return RolloutRunner(model, AgentConfig(), TrialRunner(cfg.sandbox, sandbox), tmp_path / "run",
                         concurrency=1, solver_name=name)


@pytest.mark.docker
def test_rollout_writes_trajectories_and_index_and_resumes(sandbox, cfg, tmp_path):
    task = load_task(make_task(tmp_path))
    model = Scripted([SOLVE, GIVE_UP, GIVE_UP, SOLVE, GIVE_UP])
    envs = runner_for(model, sandbox, cfg, tmp_path).run([task], attempts=3, show_progress=False)
    env = envs[task.slug]
    assert sorted(r.reward for r in env.records) == [0.0, 1.0, 1.0]
    files = sorted((tmp_path / "run/trajectories" / task.slug / "scripted").glob("*.json"))
    assert [f.name for f in files] == ["0.json", "1.json", "2.json"]
    extra = json.loads(files[0].read_text())["extra"]
    assert extra["reward"] == 1.0 and extra["env_id"] == task.slug and "verifier_stdout" in extra
    [row] = read_index(tmp_path / "run/trajectories/index.jsonl")
    assert row["attempts"] == 3 and row["mean"] == pytest.approx(2 / 3)
    assert row["most_common_failure"] == "tests failed (agent: done)"

    again = Scripted([])
    envs = runner_for(again, sandbox, cfg, tmp_path).run([task], attempts=4, show_progress=False)
    assert len(again.seen) == 1  # only attempt 3 was new; 0-2 came from their files
    assert len(envs[task.slug].records) == 4


CAT_TEST = """#!/bin/bash
if [ "$(cat /app/answer.txt)" = "42" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""


@pytest.mark.docker
@pytest.mark.security
def test_breaking_the_verifier_scores_zero_not_nothing(sandbox, cfg, tmp_path):
    toml = '[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 3\n[environment]\nnetwork_mode = "no-network"\n'
    task = load_task(make_task(tmp_path, test=CAT_TEST, toml=toml))
    fifo = Scripted([reply("```bash\nmkfifo /app/answer.txt\n```"), GIVE_UP])  # the tests' cat would block
    [record] = runner_for(fifo, sandbox, cfg, tmp_path, "fifo").run([task], attempts=1, show_progress=False)[
        task.slug].records
    # sealed: the FIFO is not carried (the tests find no answer); in place: the tests hang. Either way 0.
    assert record.reward == 0.0 and record.outcome in ("ok", "verifier_timeout")


@pytest.mark.docker
@pytest.mark.security
def test_stopping_the_container_ends_the_episode_with_zero(sandbox, cfg, tmp_path):
    task = load_task(make_task(tmp_path))
    model = Scripted([reply("```bash\nkill -TERM 1\n```")] + [reply("```bash\necho 42 > /app/answer.txt\n```")] * 5)
    [record] = runner_for(model, sandbox, cfg, tmp_path, "stopper").run([task], attempts=1, show_progress=False)[
        task.slug].records
    assert (record.outcome, record.reward, record.end_reason) == ("container_died", 0.0, "container_stopped")
    assert len(model.seen) <= 2  # no turn after the one that finds the container gone


@pytest.mark.docker
def test_calibration_expands_near_an_edge_and_diagnoses_too_hard(sandbox, cfg, tmp_path):
    easyish = load_task(make_task(tmp_path, "a"))
    hard = load_task(make_task(tmp_path, "b"))
    # A solving attempt takes two replies (the command, then DONE); giving up takes one.
    # env a: 1 of 4 solved (mean 0.25, at the edge) -> expand to 8; env b: never solved -> too hard
    solved = [SOLVE, GIVE_UP]
    script = (solved + [GIVE_UP] * 3          # a0..a3
              + [GIVE_UP] * 4                 # b0..b3
              + solved * 3 + [GIVE_UP]        # a4..a7: 3 more solved -> 4 of 8
              + [GIVE_UP])                    # b's diagnostic rollout
    model = Scripted(script)
    rollouts = runner_for(model, sandbox, cfg, tmp_path)
    calib = CalibrationConfig()
    results = {r.env_id: r for r in Calibrator(calib, rollouts).calibrate([easyish, hard], show_progress=False)}
    a, b = results[easyish.slug], results[hard.slug]
    assert a.expanded and len(a.rewards) == 8 and a.decision.verdict == ADMIT  # 4 of 8 solved
    assert not b.expanded and b.decision.verdict == TOO_HARD
    assert b.diagnostic is not None and b.diagnostic.solver == "scripted-diagnostic"
    diag = json.loads(open(b.diagnostic.path).read())
    assert "reference solution" in diag["steps"][1]["message"]


@pytest.mark.docker
def test_eval_reports_avg_and_pass_at_k(sandbox, cfg, tmp_path):
    t1, t2 = load_task(make_task(tmp_path, "a")), load_task(make_task(tmp_path, "b"))
    model = Scripted([SOLVE, GIVE_UP, GIVE_UP, GIVE_UP])
    report = evaluate(runner_for(model, sandbox, cfg, tmp_path), [t1, t2], k=2, show_progress=False)
    assert report.pass_at_k == 0.5 and report.avg_at_k == pytest.approx(0.25)


@pytest.mark.docker
def test_an_attempts_logs_are_kept_beside_its_trajectory(sandbox, cfg, tmp_path):
    task = load_task(make_task(tmp_path))
    shot = reply("```bash\nmkdir -p /logs/agent && echo frame > /logs/agent/step-1.txt; echo 42 > /app/answer.txt\n```")
    envs = runner_for(Scripted([shot, reply("DONE"), GIVE_UP]), sandbox, cfg, tmp_path).run(
        [task], attempts=2, show_progress=False)
    root = tmp_path / "run/trajectories" / task.slug / "scripted"
    with_logs = [json.loads((root / f"{k}.json").read_text())["extra"].get("logs") for k in (0, 1)]
    assert sum(r.reward for r in envs[task.slug].records) == 1.0
    kept = [k for k, logs in enumerate(with_logs) if logs]
    assert len(kept) == 1 and with_logs[kept[0]] == {"dir": f"{kept[0]}.logs", "files": 1, "bytes": 6}
    assert (root / f"{kept[0]}.logs/agent/step-1.txt").read_text() == "frame\n"
