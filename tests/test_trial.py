"""Trial outcomes with Harbor's semantics, one property per test."""

from __future__ import annotations

import pytest

from aes.sandbox import AgentRun, NopAgent, OracleAgent, Outcome, TrialRunner
from aes.tasks import load_task
from tests.conftest import make_task

pytestmark = pytest.mark.docker


@pytest.fixture
def runner(sandbox, cfg):
    return TrialRunner(cfg.sandbox, sandbox)


def run(runner, path, agent=None):
    return runner.run(load_task(path), agent or OracleAgent())


def test_oracle_solves_and_nop_does_not(runner, tmp_path):
    path = make_task(tmp_path)
    oracle, nop = run(runner, path), run(runner, path, NopAgent())
    assert (oracle.outcome, oracle.reward) == (Outcome.OK, 1.0)
    assert (nop.outcome, nop.reward) == (Outcome.OK, 0.0)


def test_reward_json_wins_over_reward_txt(runner, tmp_path):
    test = ("#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n"
            "echo '{\"reward\": 0.25, \"passed\": 1}' > /logs/verifier/reward.json\n")
    result = run(runner, make_task(tmp_path, test=test))
    assert result.reward == 0.25 and result.rewards == {"reward": 0.25, "passed": 1.0}


def test_stale_reward_files_are_removed_before_verifying(runner, tmp_path):
    solve = "echo 1 > /logs/verifier/reward.txt\n"
    result = run(runner, make_task(tmp_path, solve=solve, test="#!/bin/bash\ntrue\n"))
    assert result.outcome is Outcome.NO_REWARD_FILE and result.reward is None


def test_bad_reward_file(runner, tmp_path):
    result = run(runner, make_task(tmp_path, test="#!/bin/bash\necho lots > /logs/verifier/reward.txt\n"))
    assert result.outcome is Outcome.BAD_REWARD_FILE and "lots" in result.detail


def test_reward_json_must_be_flat_numbers(runner, tmp_path):
    test = "#!/bin/bash\necho '{\"reward\": \"NaN\"}' > /logs/verifier/reward.json\n"
    assert run(runner, make_task(tmp_path, test=test)).outcome is Outcome.BAD_REWARD_FILE


def test_solution_timeout_still_verifies(runner, tmp_path):
    toml = '[agent]\ntimeout_sec = 2\n[environment]\nnetwork_mode = "no-network"\n'
    result = run(runner, make_task(tmp_path, solve="sleep 120\n", toml=toml))
    assert result.outcome is Outcome.AGENT_TIMEOUT
    assert result.reward == 0.0  # the verifier ran, as in Harbor


def test_verifier_timeout(runner, tmp_path):
    toml = '[verifier]\ntimeout_sec = 2\n'
    result = run(runner, make_task(tmp_path, test="#!/bin/bash\nsleep 120\n", toml=toml))
    assert result.outcome is Outcome.VERIFIER_TIMEOUT and result.reward is None


def test_build_failure_is_an_outcome(runner, tmp_path):
    path = make_task(tmp_path, dockerfile="FROM python:3.12-slim\nRUN false\n")
    result = run(runner, path)
    assert result.outcome is Outcome.BUILD_FAILED and "build.failed" in result.detail


class Killer:
    """An agent whose container dies under it."""

    name = "killer"

    def run(self, task, container, timeout):
        container.container.kill()
        return AgentRun(exit_code=0)


def test_container_death_is_reported(runner, tmp_path):
    result = run(runner, make_task(tmp_path), Killer())
    assert result.outcome is Outcome.CONTAINER_DIED and result.reward is None


def test_tests_and_solution_are_invisible_to_the_agent(runner, tmp_path):
    class Looker:
        name = "looker"

        def run(self, task, container, timeout):
            return AgentRun(output=container.exec("ls -d /tests /solution 2>&1; true", 30).output)

    result = run(runner, make_task(tmp_path), Looker())
    assert "No such file" in result.agent_output and result.agent_output.count("No such file") == 2


def test_solution_env_and_verifier_env_are_passed(runner, tmp_path):
    toml = ('[solution.env]\nANSWER = "42"\n[verifier.env]\nWANT = "42"\n')
    test = ('#!/bin/bash\n[ "$(cat /app/answer.txt)" = "$WANT" ] && echo 1 > /logs/verifier/reward.txt'
            ' || echo 0 > /logs/verifier/reward.txt\n')
    result = run(runner, make_task(tmp_path, solve='echo "$ANSWER" > /app/answer.txt\n', test=test, toml=toml))
    assert result.reward == 1.0


def test_the_agents_logs_come_out_as_plain_files_only(runner, tmp_path):
    """/logs/agent and /logs/artifacts (screenshots, ...) are kept beside the trial; links, pipes and
    devices the agent planted there do not come out, and logs over the limit stay behind."""
    solve = ("echo 42 > /app/answer.txt\nmkdir -p /logs/agent/shots\n"
             "for i in 1 2 3; do echo frame$i > /logs/agent/shots/step-$i.txt; done\n"
             "echo done > /logs/artifacts/summary.txt\nln -s /etc/shadow /logs/agent/shadow\n"
             "ln -s / /logs/artifacts/root\nmkfifo /logs/agent/pipe\n")
    task = load_task(make_task(tmp_path, solve=solve))
    result = runner.run(task, OracleAgent(), logs_to=tmp_path / "kept")
    kept = tmp_path / "kept"
    assert result.reward == 1.0 and result.logs["files"] == 4
    assert sorted(p.relative_to(kept).as_posix() for p in kept.rglob("*") if p.is_file()) == [
        "agent/shots/step-1.txt", "agent/shots/step-2.txt", "agent/shots/step-3.txt", "artifacts/summary.txt"]
    assert not any(p.is_symlink() for p in kept.rglob("*"))
    assert (kept / "agent/shots/step-2.txt").read_text() == "frame2\n"

    nothing = runner.run(task, NopAgent(), logs_to=tmp_path / "empty")
    assert nothing.logs == {} and not (tmp_path / "empty").exists()

    big = load_task(make_task(tmp_path, "big", solve="head -c 3M /dev/zero > /logs/agent/blob\n"))
    small = TrialRunner(runner.cfg.__class__(**{**runner.cfg.__dict__, "trial_logs_max_mb": 1}), runner.sandbox)
    over = small.run(big, OracleAgent(), logs_to=tmp_path / "over")
    assert "trial_logs_max_mb" in over.logs["note"] and not (tmp_path / "over" / "agent").exists()
