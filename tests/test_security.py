"""Hostile solutions: whatever the agent does as root in its container, the reward it gets is
what its real work deserves, the trial ends in time, and the host and other trials are fine.

The attack tasks (aes.sandbox.selftest) pay 1 only for ``42`` in /app/answer.txt; each
"solution" attacks the verifier instead of doing that work, so the right reward is 0.
"""

from __future__ import annotations

import resource
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from aes.sandbox import OracleAgent, Outcome, TrialRunner
from aes.sandbox.selftest import ATTACKS, attack_task
from aes.tasks import load_task
from tests.conftest import make_task

pytestmark = [pytest.mark.docker, pytest.mark.security]

@pytest.fixture(scope="module")
def runner(sandbox, cfg):
    return TrialRunner(cfg.sandbox, sandbox)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_attack_on_the_verifier_earns_nothing(runner, tmp_path, attack):
    result = runner.run(load_task(attack_task(tmp_path, attack, ATTACKS[attack])), OracleAgent())
    assert result.reward != 1.0, (result.outcome, result.verifier_output[-500:])


def test_the_same_verifier_pays_honest_work(runner, tmp_path):
    honest = load_task(attack_task(tmp_path, "honest", "echo 42 > /app/answer.txt\n"))
    assert runner.run(honest, OracleAgent()).reward == 1.0


def test_sleeping_past_every_timeout_still_ends(runner, tmp_path):
    toml = '[agent]\ntimeout_sec = 2\n[verifier]\ntimeout_sec = 2\n'
    solve = "trap '' TERM INT; sleep 1000\n"
    test = "#!/bin/bash\nsleep 1000\n"
    result = runner.run(load_task(make_task(tmp_path, solve=solve, test=test, toml=toml)), OracleAgent())
    assert result.outcome is Outcome.VERIFIER_TIMEOUT and result.reward is None
    assert result.timings["agent"] < 60 and result.timings["verify"] < 60  # 2 s limits, generous margin


def test_memory_hog_is_killed_inside_its_limit(runner, tmp_path):
    toml = '[environment]\nmemory_mb = 256\nnetwork_mode = "no-network"\n'
    solve = "python3 -c 'x = bytearray(2 * 1024**3); print(len(x))'; echo survived-$?\n"
    result = runner.run(load_task(make_task(tmp_path, solve=solve, toml=toml)), OracleAgent())
    assert "survived-137" in result.agent_output  # the hog died (SIGKILL), the trial went on
    assert result.outcome is Outcome.OK and result.reward == 0.0


def test_output_flood_keeps_the_aes_process_small(runner, tmp_path):
    solve = "head -c 300000000 /dev/zero | tr '\\0' y\n"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = runner.run(load_task(make_task(tmp_path, solve=solve)), OracleAgent())
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert len(result.agent_output) < runner.cfg.output_limit_bytes + 200
    assert grown_mib < 64 and result.reward == 0.0


def test_fork_bomb_does_not_affect_a_concurrent_trial(runner, tmp_path):
    bomb = load_task(make_task(tmp_path, "bomb", solve="b() { b | b & }; b; sleep 5\n"))
    honest = load_task(make_task(tmp_path, "honest"))
    with ThreadPoolExecutor(2) as pool:
        bombed = pool.submit(runner.run, bomb, OracleAgent())
        fine = pool.submit(runner.run, honest, OracleAgent())
        assert fine.result().reward == 1.0
        assert bombed.result().reward != 1.0


def test_no_network_means_no_network(runner, tmp_path):
    solve = ("python3 -c \"import socket; s=socket.socket(); s.settimeout(3); "
             "s.connect(('1.1.1.1', 53))\" && echo 42 > /app/answer.txt; true\n")
    result = runner.run(load_task(make_task(tmp_path, solve=solve)), OracleAgent())
    assert result.reward == 0.0 and "unreachable" in result.agent_output.lower()


def test_32_concurrent_trials_finish_without_leaks(runner, tmp_path):
    tasks = [load_task(make_task(tmp_path, f"t{i}", solve="seq 1 200000; echo 42 > /app/answer.txt\n"))
             for i in range(32)]
    image = runner.sandbox.build(tasks[0]).image
    peak = [0]
    done = threading.Event()

    def watch():
        while not done.wait(0.2):
            peak[0] = max(peak[0], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)

    threading.Thread(target=watch, daemon=True).start()
    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(lambda t: runner.run(t, OracleAgent(), image), tasks))
    done.set()
    assert [r.reward for r in results] == [1.0] * 32
    mine = runner.sandbox.client.api.containers(all=True, filters={"label": "aes.role=trial"})
    assert [c for c in mine if c["Labels"].get("aes.pid") == str(__import__("os").getpid())] == []
