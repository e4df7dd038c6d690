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


# -- a malformed reward file is a reason, never an exception -------------------------------------

_PY = "python3 -c"
BAD_REWARDS = {
    "deeply_nested": f"{_PY} \"print('[' * 300000 + ']' * 300000)\" > /logs/verifier/reward.json",
    "huge_sparse": "truncate -s 5G /logs/verifier/reward.json",
    "over_a_mebibyte": "head -c 2M /dev/zero | tr '\\\\0' ' ' > /logs/verifier/reward.txt",
    "not_utf8": "printf '\\\\xff\\\\xfe1' > /logs/verifier/reward.txt",
    "nan": "echo '{\"reward\": NaN}' > /logs/verifier/reward.json",
    "not_an_object": "echo '[1.0]' > /logs/verifier/reward.json",
    "huge_integer": f"{_PY} \"print('{{\\\\\"reward\\\\\": 1' + '0' * 400 + '}}')\" > /logs/verifier/reward.json",
    "a_fifo": "mkfifo /logs/verifier/reward.json",
    "a_directory": "mkdir /logs/verifier/reward.json",
    "a_symlink": "echo 1 > /tmp/r; ln -s /tmp/r /logs/verifier/reward.txt",
}


@pytest.mark.parametrize("name", sorted(BAD_REWARDS))
def test_a_malformed_reward_file_is_a_bad_reward_file(runner, tmp_path, name):
    """Each is what a verifier (or an agent, through what the tests copy) could leave; a reward.json that
    cannot be read never lets a reward.txt count instead."""
    test = f"#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n{BAD_REWARDS[name]}\n"
    if name in ("over_a_mebibyte", "not_utf8", "a_symlink"):
        test = f"#!/bin/bash\n{BAD_REWARDS[name]}\n"
    result = run(runner, make_task(tmp_path, test=test))
    assert result.outcome is Outcome.BAD_REWARD_FILE and result.reward is None, (result.outcome, result.detail)
    assert result.detail


# -- storage is the disk a container uses ---------------------------------------------------------

STORAGE_TOML = '[verifier]\ntimeout_sec = 60\n[environment]\nnetwork_mode = "no-network"\nstorage_mb = 100\n'


def test_a_sparse_file_costs_no_storage_but_real_data_does(runner, tmp_path):
    """Tests that fake a full disk with a 40 GiB sparse file keep their reward; 150 MiB of data written
    past a 100 MiB limit is still killed. Measured as the engine's apparent size (the watchdog's
    fallback, i.e. the defence off), the honest verifier is killed and the reference gets nothing."""
    test = ("#!/bin/bash\ntruncate -s 40G /tmp/fake-full-disk\nsleep 4\n"
            '[ "$(cat /app/answer.txt)" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n')
    sparse = make_task(tmp_path, "sparse", test=test, toml=STORAGE_TOML)
    fill = make_task(tmp_path, "fill", toml=STORAGE_TOML,
                     solve="head -c 150M /dev/urandom > /app/blob; sleep 5; echo 42 > /app/answer.txt\n")
    watch = runner.sandbox.storage
    assert watch.measure_blocks
    try:
        watch.measure_blocks = False
        apparent = run(runner, sparse)
    finally:
        watch.measure_blocks = True
    assert apparent.reward is None and apparent.outcome in (Outcome.STORAGE_EXCEEDED, Outcome.NO_REWARD_FILE)
    honest = run(runner, sparse)
    assert (honest.outcome, honest.reward) == (Outcome.OK, 1.0), honest.detail
    filled = run(runner, fill)
    assert filled.outcome is Outcome.STORAGE_EXCEEDED and filled.reward is None
    assert "over the task's storage limit of 100 MiB" in filled.detail


# -- file names that are not UTF-8 -----------------------------------------------------------------

def test_file_names_that_are_not_utf8_are_carried_and_logged(runner, tmp_path):
    """The work's files, the agent's logs and the carried changes may have any bytes as names: the
    trial still verifies, keeps the logs, and its result prints and saves as JSON."""
    import json

    bad = "$'\\xff\\xfe-name'"
    solve = (f"echo 42 > /app/answer.txt\ntouch /app/{bad} /tmp/{bad} /logs/agent/{bad}.log\n"
             f"mkdir -p /app/{bad}.d && echo x > /app/{bad}.d/f && echo done > /logs/artifacts/{bad}\n")
    test = ("#!/bin/bash\n" + 'ls /app | grep -c name > /tmp/n; [ "$(cat /app/answer.txt)" = 42 ] && '
            '[ "$(cat /tmp/n)" = 2 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n')
    task = load_task(make_task(tmp_path, solve=solve, test=test))
    result = runner.run(task, OracleAgent(), logs_to=tmp_path / "kept")
    assert (result.outcome, result.reward) == (Outcome.OK, 1.0), result.detail
    assert result.logs["files"] == 2
    json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")
