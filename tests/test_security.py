"""Hostile solutions: whatever the agent does as root in its container, the reward it gets is
what its real work deserves, the trial ends in time, and the host and other trials are fine.

The attack tasks (aes.sandbox.selftest) pay 1 only for ``42`` in /app/answer.txt; each
"solution" attacks the verifier instead of doing that work, so the right reward is 0, and a
finished attempt must not end without a reward (that would dodge the 0). Each attack has an
honest twin on the same task variant that must earn 1, so the checks can fail.
"""

from __future__ import annotations

import dataclasses
import os
import re
import resource
import socket
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from aes.sandbox import OracleAgent, Outcome, TrialRunner
from aes.sandbox.selftest import ATTACKS, CATALOGUE, AttackAgent, held, task_for
from aes.sandbox.selftest_loaders import FORGE_LOOP, LOADER_ATTACKS
from aes.sandbox.trial import AGENT_BROKE, INFRASTRUCTURE
from aes.tasks import load_task
from tests.conftest import make_task

pytestmark = [pytest.mark.docker, pytest.mark.security]

IN_PLACE_FORGEABLE = ("fake_python", "fake_pytest_package", "sitecustomize", "pth_file", "alternatives_redirect",
                      "shadow_on_path", "venv_python_replaced", "waits_for_tests", "image_env_hooks",
                      "cwd_module_shadow", "answer_links_to_expected", "answer_links_to_verifier_scratch",
                      "answer_hardlinks_verifier_scratch", "init_script_replaced", "venv_pip_conf",
                      "pip_conf_in_moved_home", "git_config_in_moved_home", "git_filter_in_repo",
                      "git_external_diff_in_repo", "git_include_in_repo", "bash_exported_function",
                      "entry_point_plugin", "readonly_scratch", *(a.name for a in LOADER_ATTACKS))
"""Attacks that do earn 1 under Harbor's in-place verification (sandbox.trusted_verifier=false):
proof that the attacks are real, and the reason the sealed verifier is the default."""


@pytest.fixture(scope="module")
def runner(sandbox, cfg):
    return TrialRunner(cfg.sandbox, sandbox)


@pytest.fixture(scope="module")
def in_place(sandbox, cfg):
    return TrialRunner(dataclasses.replace(cfg.sandbox, trusted_verifier=False), sandbox)


TRIALS_AT_ONCE = 4
"""The catalogue's trials run this many at a time (their time is mostly the engine's round trips: on
2 cores four at once take ~60% of the time one at a time); each test then judges its own attack's
result. Attacks that race the verifier (``waits_for_tests``) are held whatever the load."""


def _all_at_once(runner: TrialRunner, root, jobs: dict[str, tuple]) -> dict[str, object]:
    """``name -> (attack, honest, agent)`` run through ``runner``, :data:`TRIALS_AT_ONCE` at a time:
    ``name -> TrialResult`` (or the exception the run raised, which that name's test re-raises)."""
    def one(item):
        name, (attack, honest, agent) = item
        try:
            return name, runner.run(load_task(task_for(root, attack, honest=honest)), agent)
        except Exception as exc:  # noqa: BLE001 - reported by the test of that attack
            return name, exc

    with ThreadPoolExecutor(TRIALS_AT_ONCE) as pool:
        return dict(pool.map(one, jobs.items()))


def _racing(name: str) -> bool:
    """An attack that leaves a process rewriting the reward while the root test script writes its 0
    (:data:`~aes.sandbox.selftest_loaders.FORGE_LOOP`): whether it gets its 1 in is a race, which a
    loaded machine can make it lose."""
    return repr(FORGE_LOOP) in ATTACKS[name].solve  # typed through printf


def _races_rerun(runner: TrialRunner, root, results: dict, forged) -> dict:
    """Up to two more tries for a racing attack whose 1 did not get in (``forged(result)`` false):
    the test that uses these results asks whether the attack can get through at all."""
    for name in [n for n in results if _racing(n)]:
        for again in range(2):
            result = results[name]
            if isinstance(result, Exception) or forged(result):
                break
            results[name] = _all_at_once(runner, root / f"again-{again}", _attacks([name]))[name]
    return results


def _result(results: dict, name: str):
    result = results[name]
    if isinstance(result, Exception):
        raise result
    return result


def _attacks(names) -> dict[str, tuple]:
    return {name: (ATTACKS[name], False, AttackAgent(ATTACKS[name])) for name in names}


@pytest.fixture(scope="module")
def sealed(runner, tmp_path_factory):
    """Every attack of the catalogue against the default (sealed, audited) verifier."""
    return _all_at_once(runner, tmp_path_factory.mktemp("sealed"), _attacks(a.name for a in CATALOGUE))


@pytest.fixture(scope="module")
def through_the_engine(runner, tmp_path_factory):
    """The same, with the agent's changes read through the engine's API (``docker diff`` and archives)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("aes.sandbox.verifier.host_layer", _verifier_only)
        return _all_at_once(runner, tmp_path_factory.mktemp("engine"), _attacks(a.name for a in CATALOGUE))


@pytest.fixture(scope="module")
def honest_twins(runner, tmp_path_factory):
    jobs = {name: (ATTACKS[name], True, AttackAgent(ATTACKS[name], honest=True)) for name in _variants()}
    return _all_at_once(runner, tmp_path_factory.mktemp("honest"), jobs)


@pytest.fixture(scope="module")
def in_place_results(in_place, tmp_path_factory):
    root = tmp_path_factory.mktemp("in-place")
    return _races_rerun(in_place, root, _all_at_once(in_place, root, _attacks(IN_PLACE_FORGEABLE)),
                        lambda result: result.reward == 1.0)


@pytest.fixture(scope="module")
def past_a_naive_seal(runner, tmp_path_factory):
    """The loader attacks against a seal whose defences against them are off (:func:`_naive_seal`)."""
    with pytest.MonkeyPatch.context() as patch:
        _naive_seal(patch)
        root = tmp_path_factory.mktemp("naive")
        return _races_rerun(runner, root, _all_at_once(runner, root, _attacks(a.name for a in LOADER_ATTACKS)),
                            lambda result: result.agent_info.get("audit", {}).get("tests_reward") == 1.0)


@pytest.mark.parametrize("attack", [a.name for a in CATALOGUE])
def test_attack_on_the_verifier_earns_nothing(sealed, attack):
    result = _result(sealed, attack)
    assert held(result), (result.outcome, result.reward, result.detail, result.verifier_output[-500:])
    assert result.agent_info["audit"]["watched"], result.agent_info["audit"]  # the net was there


@pytest.mark.parametrize("attack", [a.name for a in CATALOGUE])
def test_attack_earns_nothing_when_changes_are_read_through_the_engine(through_the_engine, attack):
    """The same catalogue with the agent's changes read through the engine's API (``docker diff`` and
    archives), as on remote or rootless engines and for a container the freezer could not stop: an
    agent that makes its freeze fail must not find a weaker path (``symlinked_tool_dir`` forged 1
    there while the layer reader held)."""
    result = _result(through_the_engine, attack)
    assert held(result), (result.outcome, result.reward, result.detail, result.verifier_output[-500:])
    assert "(engine API)" in result.agent_info.get("carried", "(engine API): nothing was carried")


def _verifier_only(container):
    """``host_layer`` for the verifier's container only (the audit watches it); the agent's changes
    are read through the engine's API."""
    from aes.sandbox.carry import host_layer

    return host_layer(container) if container.container.labels.get("aes.role") == "verifier" else None


def _variants():
    seen = {}
    for attack in CATALOGUE:
        seen.setdefault((attack.dockerfile, attack.test_sh), attack.name)
    return sorted(seen.values())


@pytest.mark.parametrize("attack", _variants())
def test_the_same_task_variant_pays_honest_work(honest_twins, attack):
    result = _result(honest_twins, attack)
    assert (result.outcome, result.reward) == (Outcome.OK, 1.0), (result.detail, result.verifier_output[-500:])
    audit = result.agent_info["audit"]
    assert audit["watched"] and audit["opened"] >= 1 and not audit["code"] and not audit["startup"], audit


@pytest.mark.parametrize("attack", IN_PLACE_FORGEABLE)
def test_the_attack_is_real_under_in_place_verification(in_place_results, attack):
    result = _result(in_place_results, attack)
    assert result.reward == 1.0, (result.outcome, result.detail, result.verifier_output[-300:])


def _naive_seal(patch: pytest.MonkeyPatch) -> None:
    """The sealed verifier with the defences of issue 23 classes 1-4 off: a carry that keeps only
    the verifier's own paths and the runtime (``/usr``, ``/bin``, ``/lib``), git configurations and
    ``/etc/passwd`` copied as written, relative PATH entries kept."""
    from aes.sandbox import seal, verifier

    def naive(self, path, is_dir=None):
        path = "/" + path.lstrip("/")
        return next((f"{root} (naive)" for root in (*seal.OWN_ROOTS, *seal.SYSTEM_ROOTS) if seal._under(path, root)),
                    None)

    patch.setattr(seal.SealPolicy, "deny_reason", naive)
    patch.setattr("aes.sandbox.gitconfig.sanitize", lambda text: (text, []))
    patch.setattr("aes.sandbox.accounts.merge_passwd", lambda pristine, agent, safe: (agent, []))
    patch.setattr(verifier, "absolute_path", lambda value: value)


@pytest.mark.parametrize("attack", [a.name for a in LOADER_ATTACKS])
def test_the_audit_catches_what_gets_past_the_seal(past_a_naive_seal, attack):
    """With the seal's defences against these attacks off, each one gets through (the tests write
    reward 1: each was real before its defence) and the tamper audit alone ends it as tampered."""
    result = _result(past_a_naive_seal, attack)
    audit = result.agent_info.get("audit", {})
    assert result.outcome is Outcome.TAMPERED and result.reward is None, (result.outcome, result.reward, audit)
    assert audit.get("tests_reward") == 1.0 and "/app/" in result.detail, (audit, result.detail)


HONEST_WITH_LEFTOVERS = (
    "mkdir -p /app/tools; printf 'def answer():\\n    return 42\\n' > /app/util.py\n"
    "printf '#!/usr/bin/env python3\\nimport sys\\nsys.path.insert(0, \"/app\")\\nimport util\\n"
    "open(\"/app/answer.txt\", \"w\").write(str(util.answer()) + \"\\\\n\")\\n' > /app/solve.py\n"
    "chmod +x /app/solve.py; /app/solve.py; printf '#!/bin/sh\\necho helper\\n' > /app/tools/pytest; "
    "chmod +x /app/tools/pytest; cd /app && git init -q 2>/dev/null; true\n")
"""Honest work that leaves the agent's own scripts behind: a module (and its ``__pycache__``), an
executable script, a program named like a test tool in a directory of its own."""


@pytest.mark.parametrize("attack", ["cwd_module_shadow", "startup_hook_as_package", "relative_path_entry",
                                    "images_module_edited", "login_shell"])
def test_honest_work_that_leaves_scripts_behind_is_paid(runner, tmp_path, attack):
    """No false alarm of the audit: the tests never run the scripts the agent used for its work."""
    result = runner.run(load_task(task_for(tmp_path, ATTACKS[attack], honest=True)), AttackAgent(HONEST_WITH_LEFTOVERS))
    audit = result.agent_info["audit"]
    assert (result.outcome, result.reward) == (Outcome.OK, 1.0), (result.detail, audit)
    assert audit["watched"] and not audit["code"] and not audit["startup"], audit
    carried = int(re.search(r"carried (\d+) file", result.agent_info["carried"]).group(1))
    assert carried >= 4, result.agent_info["carried"]  # the scripts were there for the tests to run


SOLVER_EPISODES = ("stdlib_imports_when_present", "plugin_metadata_spelling", "git_common_dir", "login_shell",
                   "relative_path_entry", "tests_own_relative_path")
"""One attack of each class (and the two only the audit stops) typed by a solver in its own container."""


@pytest.mark.parametrize("attack", SOLVER_EPISODES)
def test_a_solver_typing_the_attack_earns_nothing(runner, in_place, tmp_path, attack):
    """A real solver episode (the terminal agent; its model replays the attack as one command):
    reward 1 under in-place verification, nothing sealed."""
    from aes.agents import TerminalAgent
    from aes.config import AgentConfig
    from tests.test_agent import Scripted, reply

    task = load_task(task_for(tmp_path, ATTACKS[attack]))

    def episode():
        return TerminalAgent(Scripted([reply(f"```bash\n{ATTACKS[attack].solve}```"), reply("DONE")]), AgentConfig())

    real = in_place.run(task, episode())
    assert real.reward == 1.0, (real.outcome, real.detail, real.agent_output[-300:])
    sealed = runner.run(task, episode())
    assert sealed.agent_info["end_reason"] == "done" and held(sealed), (sealed.outcome, sealed.reward, sealed.detail)


def test_sleeping_past_every_timeout_still_ends(runner, tmp_path):
    toml = '[agent]\ntimeout_sec = 2\n[verifier]\ntimeout_sec = 2\n'
    solve = "trap '' TERM INT; sleep 1000\n"
    test = "#!/bin/bash\nsleep 1000\n"
    result = runner.run(load_task(make_task(tmp_path, solve=solve, test=test, toml=toml)), OracleAgent())
    assert result.outcome is Outcome.VERIFIER_TIMEOUT and result.reward is None
    assert result.timings["agent"] < 60 and result.timings["verify"] < 60  # 2 s limits, generous margin


def test_declared_timeouts_are_bounded_by_aes(sandbox, cfg, tmp_path):
    bounded = dataclasses.replace(cfg.sandbox, max_agent_timeout_sec=3.0, max_verifier_timeout_sec=3.0)
    toml = '[agent]\ntimeout_sec = 1e9\n[verifier]\ntimeout_sec = 1e300\n'
    result = TrialRunner(bounded, sandbox).run(
        load_task(make_task(tmp_path, solve="sleep 100000\n", test="#!/bin/bash\nsleep 100000\n", toml=toml)),
        OracleAgent())
    assert result.outcome is Outcome.VERIFIER_TIMEOUT
    assert result.timings["agent"] < 30 and result.timings["verify"] < 30
    sandbox.drain()  # containers are removed in the background
    mine = sandbox.client.api.containers(all=True, filters={"label": f"aes.pid={os.getpid()}"})
    assert [c for c in mine if c["Labels"].get("aes.role") in ("trial", "verifier")] == []


def test_declared_build_timeout_is_bounded_by_aes(sandbox, cfg, tmp_path):
    from aes.sandbox.images import ImageBuilder

    bounded = dataclasses.replace(cfg.sandbox, max_build_timeout_sec=3.0)
    task = load_task(make_task(tmp_path, dockerfile="FROM python:3.12-slim\nRUN sleep 600\n",
                               toml='[environment]\nbuild_timeout_sec = 1e300\n'))
    build = ImageBuilder(bounded).build(task)
    assert build.image is None and build.reason.code == "build.timeout" and build.seconds < 60


def test_storage_past_the_limit_ends_the_attempt(runner, tmp_path):
    toml = '[agent]\ntimeout_sec = 60\n[environment]\nstorage_mb = 64\nnetwork_mode = "no-network"\n'
    solve = "for i in $(seq 40); do head -c 10000000 /dev/zero > /app/blob$i; sleep 0.1; done; echo 42 > /app/answer.txt\n"
    result = runner.run(load_task(make_task(tmp_path, solve=solve, toml=toml)), OracleAgent())
    assert result.outcome is Outcome.STORAGE_EXCEEDED and result.outcome in AGENT_BROKE
    assert result.reward is None and "storage" in result.detail


def test_changes_too_large_to_carry_end_the_attempt(runner, tmp_path, cfg, sandbox):
    small = TrialRunner(dataclasses.replace(cfg.sandbox, max_carry_entries=50), sandbox)
    solve = "mkdir -p /app/many; for i in $(seq 200); do echo $i > /app/many/f$i; done; echo 42 > /app/answer.txt\n"
    result = small.run(load_task(make_task(tmp_path, solve=solve)), OracleAgent())
    assert result.outcome is Outcome.STORAGE_EXCEEDED and "max_carry_entries" in result.detail


@pytest.mark.parametrize("path", ["overlay", "engine API"])
def test_a_carry_that_takes_too_long_ends_the_attempt(cfg, sandbox, tmp_path, path, monkeypatch):
    """sandbox.max_carry_sec bounds reading the agent's changes on both paths (here 0.01 s for 3000
    files; benchmarks/reliability.py measures a 200k-entry carry at the default)."""
    if path == "engine API":
        monkeypatch.setattr("aes.sandbox.verifier.host_layer", _verifier_only)
    slow = TrialRunner(dataclasses.replace(cfg.sandbox, max_carry_sec=0.01), sandbox)
    solve = ("mkdir -p /app/many /app/many2; for i in $(seq 1500); do echo $i > /app/many/f$i; echo $i > /app/many2/f$i;"
             " done; echo 42 > /app/answer.txt\n")
    result = slow.run(load_task(make_task(tmp_path, solve=solve)), OracleAgent())
    assert result.outcome is Outcome.STORAGE_EXCEEDED and "max_carry_sec" in result.detail, result.detail


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


def _host_addresses(sandbox) -> list[str]:
    net = sandbox.client.networks.get(sandbox.network).attrs
    out = [c["Gateway"] for c in net["IPAM"]["Config"] if c.get("Gateway")]
    try:
        lines = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True).stdout
        out += [line.split()[3].split("/")[0] for line in lines.splitlines() if " lo " not in line]
    except OSError:
        pass
    return sorted(set(out))


@pytest.fixture
def host_service():
    """A TCP service listening on every host address, as a model server or database would."""
    server = socket.socket()
    server.bind(("0.0.0.0", 0))
    server.listen(16)
    stop = threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.sendall(b"SECRET\n")
                conn.close()
            except OSError:
                pass

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


def _probe(addresses: list[str], port: int) -> str:
    targets = ", ".join(f"('{a}', {port})" for a in addresses)
    return ("python3 - <<'EOF'\nimport socket\nfor target in [" + targets + "]:\n"
            "    try:\n        s = socket.create_connection(target, timeout=3)\n"
            "        print('REACHED', target, s.recv(16))\n    except OSError as exc:\n"
            "        print('blocked', target, exc)\nEOF\n")


def test_host_services_are_unreachable_from_trials(runner, sandbox, tmp_path, host_service):
    from aes.sandbox.network import host_isolated

    if not host_isolated(sandbox.cfg):
        pytest.skip("the host firewall needs root and iptables")
    addresses = _host_addresses(sandbox)
    assert socket.create_connection(("127.0.0.1", host_service), timeout=3).recv(16) == b"SECRET\n"
    toml = '[environment]\nnetwork_mode = "public"\n'
    result = runner.run(load_task(make_task(tmp_path, solve=_probe(addresses, host_service), toml=toml)),
                        OracleAgent())
    assert "REACHED" not in result.agent_output and result.agent_output.count("blocked") == len(addresses)


def test_host_services_are_unreachable_from_builds(sandbox, tmp_path, host_service):
    from aes.sandbox.network import host_isolated

    if not host_isolated(sandbox.cfg):
        pytest.skip("the host firewall needs root and iptables")
    addresses = _host_addresses(sandbox)
    targets = ", ".join(f"('{a}', {host_service})" for a in addresses)
    run = ("RUN python3 -c \"import socket, sys; ok = [t for t in [" + targets + "] "
           "if not socket.socket().connect_ex(t)]; sys.exit(1 if ok else 0)\"\n")
    task = load_task(make_task(tmp_path, dockerfile="FROM python:3.12-slim\n" + run))
    build = sandbox.build(task)
    assert build.image is not None, build.reason


def test_non_root_image_user_is_verified_as_harbor_does(runner, in_place, tmp_path):
    dockerfile = ("FROM python:3.12-slim\nRUN useradd -m tester && mkdir -p /app && chown tester /app\n"
                  "WORKDIR /app\nUSER tester\n")
    test = ('#!/bin/bash\n[ "$(id -u)" != 0 ] && [ "$(cat /app/answer.txt)" = 42 ] '
            '&& echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n')
    path = make_task(tmp_path, dockerfile=dockerfile, test=test)
    for trials in (runner, in_place):
        result = trials.run(load_task(path), OracleAgent())
        assert (result.outcome, result.reward) == (Outcome.OK, 1.0), (result.detail, result.verifier_output)


def test_infrastructure_failure_of_the_agent_is_never_a_reward(runner, tmp_path):
    from aes.errors import InfrastructureError

    class DeadServer:
        name = "dead-server"

        def run(self, task, container, timeout):
            raise InfrastructureError("model server http://127.0.0.1:9/v1 is unreachable")

    result = runner.run(load_task(make_task(tmp_path)), DeadServer())
    assert result.outcome is Outcome.INFRA_ERROR and result.outcome in INFRASTRUCTURE
    assert result.reward is None and "127.0.0.1:9" in result.detail


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
    runner.sandbox.drain()  # containers are removed in the background
    mine = runner.sandbox.client.api.containers(all=True, filters={"label": f"aes.pid={os.getpid()}"})
    assert [c for c in mine if c["Labels"].get("aes.role") in ("trial", "verifier")] == []
