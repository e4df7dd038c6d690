"""``sandbox.executor=ray`` (aes/sandbox/ray_executor.py).

The unit tests need neither Ray nor Docker (those that need Ray skip without it). The cluster
tests start a two-node Ray cluster on this machine whose second node runs its trials on a second
Docker engine started here (tests/ray_cluster.py), run validation, oracle trials and solver
attempts landing on both nodes, then kill the second node mid-run. They skip without Ray, root or
``dockerd`` unless ``AES_REQUIRE_RAY=1`` (CI), where they fail instead.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from aes.config import BudgetConfig, ConfigError, SandboxConfig, compose_config
from aes.sandbox.ray_executor import AgentSpec, describe_agent, engine_for, pack_task, unpack_task
from aes.sandbox.trial import NopAgent, OracleAgent
from tests.conftest import make_task

REQUIRE = os.environ.get("AES_REQUIRE_RAY") == "1"


def _need_ray():
    try:
        import ray  # noqa: F401
    except ImportError:
        if REQUIRE:
            raise
        pytest.skip("Ray is not installed (pip install -e '.[ray]'); CI sets AES_REQUIRE_RAY=1 and runs these")


# -- config ---------------------------------------------------------------------------------------


def test_executor_config_is_checked():
    cfg = compose_config(["sandbox.executor=ray", "+sandbox.ray_resources.aes_sandbox=1",
                          "+sandbox.ray_node_docker_hosts.node_b=tcp://10.0.0.2:2375"])
    assert cfg.sandbox.executor == "ray" and cfg.sandbox.ray_resources == {"aes_sandbox": 1}
    assert cfg.sandbox.ray_node_docker_hosts == {"node_b": "tcp://10.0.0.2:2375"}
    assert compose_config([]).sandbox.executor == "local"
    with pytest.raises(ConfigError, match="sandbox.executor must be"):
        compose_config(["sandbox.executor=slurm"])
    with pytest.raises(ConfigError, match="needs sandbox.backend=docker"):
        SandboxConfig(executor="ray", backend="simulated")
    with pytest.raises(ConfigError, match="ray_max_retries"):
        compose_config(["sandbox.ray_max_retries=-1"])
    with pytest.raises(ConfigError, match="ray_resources"):
        compose_config(["+sandbox.ray_resources.gpu=0"])
    with pytest.raises(ConfigError, match="ray_cpus_per_trial"):
        compose_config(["sandbox.ray_cpus_per_trial=0"])


def test_the_default_run_imports_no_ray():
    code = ("import sys, aes.compose, aes.sandbox.executors, aes.admission.validate, aes.rollout, aes.run; "
            "print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- what travels to a worker ---------------------------------------------------------------------


def test_task_bundle_round_trip_is_deterministic(tmp_path):
    path = make_task(tmp_path, "t", files={"environment/data/in.txt": "x" * 1000, "tests/helper.py": "pass\n"})
    (path / "environment" / "link").symlink_to("data/in.txt")
    os.chmod(path / "solution" / "solve.sh", 0o755)
    first, again = pack_task(path), pack_task(path)
    assert first.digest == again.digest and first.data == again.data
    os.utime(path / "instruction.md", (1, 1))  # times are not content
    assert pack_task(path).digest == first.digest
    (path / "tests" / "helper.py").write_text("pass  \n")
    assert pack_task(path).digest != first.digest

    out = unpack_task(first, tmp_path / "node")
    assert out == tmp_path / "node" / first.digest
    assert (out / "environment" / "data" / "in.txt").read_text() == "x" * 1000
    assert os.readlink(out / "environment" / "link") == "data/in.txt"
    assert os.stat(out / "solution" / "solve.sh").st_mode & stat.S_IXUSR
    assert unpack_task(first, tmp_path / "node") == out  # unpacked once
    assert [p.name for p in (tmp_path / "node").iterdir()] == [first.digest]


def test_a_hostile_bundle_cannot_write_outside_its_directory(tmp_path):
    import io
    import tarfile

    from aes.sandbox.ray_executor import TaskBundle

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(tarfile.TarError):
        unpack_task(TaskBundle("0" * 64, buf.getvalue()), tmp_path / "node")
    assert not (tmp_path / "escaped.txt").exists()


def test_engine_of_a_node_from_the_mapping():
    node = {"NodeManagerAddress": "10.0.0.7", "Resources": {"CPU": 8.0, "rack_b": 1.0}, "Labels": {"zone": "b"}}
    assert engine_for(node, {}) is None
    assert engine_for(node, {"rack_a": "tcp://a:2375", "rack_b": "tcp://b:2375"}) == "tcp://b:2375"
    assert engine_for(node, {"zone=b": "unix:///run/b.sock"}) == "unix:///run/b.sock"
    assert engine_for(node, {"zone=a": "x", "10.0.0.7": "ssh://me@n7"}) == "ssh://me@n7"


def test_agents_travel_as_descriptions():
    from aes.agents import TerminalAgent
    from aes.models import build_model

    assert describe_agent(OracleAgent()) == AgentSpec("oracle", "oracle")
    assert describe_agent(NopAgent()).kind == "nop"
    cfg = compose_config(["solver=scripted", "agent.max_turns=3"])
    model = build_model(cfg.solver)
    spec = describe_agent(TerminalAgent(model, cfg.agent, name="solver-x", hints="look in /app"))
    assert spec.kind == "terminal" and spec.model == cfg.solver and spec.name == "solver-x"
    assert spec.state["hints"] == "look in /app" and spec.state["cfg"].max_turns == 3
    assert "model" not in spec.state

    from aes.sandbox.ray_executor import _rebuild_agent

    agent, rebuilt = _rebuild_agent(spec, BudgetConfig())
    assert isinstance(agent, TerminalAgent) and agent.hints == "look in /app" and agent.name == "solver-x"
    assert rebuilt is not model and rebuilt.config == cfg.solver


def test_an_agent_that_cannot_travel_is_refused():
    _need_ray()
    import threading

    class Holder:
        name = "holder"

        def __init__(self):
            self.lock = threading.Lock()

        def run(self, task, container, timeout):  # pragma: no cover - never runs
            raise AssertionError

    with pytest.raises(TypeError, match="cannot be shipped to a Ray worker"):
        describe_agent(Holder())


# -- a two-node cluster on this machine -----------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(sandbox):
    """Head (1 CPU, this machine's engine) + worker (2 CPUs, a second engine started here)."""
    _need_ray()
    import shutil

    missing = [why for why, bad in (("not root", os.geteuid() != 0), ("no dockerd", shutil.which("dockerd") is None),
                                    ("no docker CLI", shutil.which("docker") is None)) if bad]
    if missing:
        if REQUIRE:
            pytest.fail(f"the Ray cluster tests need a second Docker engine: {', '.join(missing)}")
        pytest.skip(f"the Ray cluster tests need a second Docker engine: {', '.join(missing)}")
    from tests.ray_cluster import TwoNodeCluster

    started = time.monotonic()
    two = TwoNodeCluster(base_image=sandbox.cfg.base_image)
    print(f"two-node Ray cluster with a second engine up in {time.monotonic() - started:.1f} s")
    yield two
    two.stop()


def _ray_cfg(cluster, *extra: str):
    return compose_config([f"sandbox.ray_address={cluster.address}", "sandbox.executor=ray",
                           "sandbox.default_cpus=1", "sandbox.default_memory_mb=512", *extra])


def _job_containers(client, job_id: str) -> list[dict]:
    return client.api.containers(all=True, filters={"label": ["aes.managed=true", f"aes.ray.job={job_id}"]})


@pytest.mark.docker
@pytest.mark.slow
def test_trials_validation_and_rollouts_run_on_both_nodes(cluster, sandbox, tmp_path):
    from aes.admission import Validator
    from aes.models import RunBudget, build_model
    from aes.rollout import RolloutRunner
    from aes.sandbox.docker_client import owner_labels
    from aes.sandbox.executors import trial_runner
    from aes.sandbox.ray_executor import RayTrialRunner
    from aes.tasks import load_task

    # an orphan on the second engine (its owner process is gone): the executor's start reaps it
    labels = {**owner_labels("trial", "orphan"), "aes.pid": "999999999", "aes.pid_start": "1"}
    orphan = cluster.engine.client.containers.run(sandbox.cfg.base_image, ["sleep", "600"], detach=True,
                                                  labels=labels, network_mode="none")
    cfg = _ray_cfg(cluster)
    started = time.monotonic()
    trials = trial_runner(cfg.sandbox)
    print(f"executor start (survey + reap of both nodes): {time.monotonic() - started:.1f} s")
    assert isinstance(trials, RayTrialRunner)
    try:
        hosts = {r["docker_host"] for r in trials.nodes}
        assert hosts == {"unix:///var/run/docker.sock", cluster.engine.host}
        assert orphan.id not in {c["Id"] for c in cluster.engine.client.api.containers(all=True)}

        # per-trial resources: the task's CPUs and memory, bounded by the largest node (2 CPUs)
        big = load_task(make_task(tmp_path, "big", toml='[task]\nname = "test/big"\n[environment]\ncpus = 8\n'
                                                        'memory_mb = 1024\n'))
        assert trials.trial_resources(big) == {"num_cpus": 2.0, "memory": 1024 * 2**20}

        # admission checks 1-4 through the executor: builds on a node, sealed verifier on both
        good = [make_task(tmp_path, f"good{i}", solve="sleep 1; echo 42 > /app/answer.txt\n") for i in range(2)]
        free = make_task(tmp_path, "free", test="#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
        broken = make_task(tmp_path, "broken", dockerfile="FROM python:3.12-slim\nRUN exit 3\n")
        validator = Validator(cfg.sandbox, trials)
        with ThreadPoolExecutor(4) as pool:
            reports = list(pool.map(validator.validate, [*good, free, broken]))
        assert [r.valid for r in reports] == [True, True, False, False], [r.reasons for r in reports]
        assert [r.oracle_reward for r in reports[:2]] == [1.0, 1.0]
        assert [x.code for x in reports[2].reasons] == ["nop.reward_too_high"]
        assert [x.code for x in reports[3].reasons] == ["build.failed"]

        # oracle trials side by side land on both nodes, each on its own engine
        tasks = [load_task(p) for p in good]
        with ThreadPoolExecutor(6) as pool:
            results = list(pool.map(lambda t: trials.run(t, OracleAgent()), tasks * 3))
        assert [r.reward for r in results] == [1.0] * 6, [r.detail for r in results]
        assert {r.agent_info["executor"]["docker_host"] for r in results} == hosts
        assert all("carried" in r.agent_info for r in results)  # verified sealed

        # solver attempts: the terminal agent is rebuilt on the worker; its calls charge our budget
        cfg_solver = compose_config(["solver=scripted"])
        budget = RunBudget()
        solver = build_model(cfg_solver.solver, budget)
        rollouts = RolloutRunner(solver, cfg_solver.agent, trials, tmp_path / "run", concurrency=4)
        envs = rollouts.run(tasks, attempts=2, show_progress=False)
        records = [r for env in envs.values() for r in env.records]
        assert len(records) == 4 and {r.outcome for r in records} == {"ok"} and {r.reward for r in records} == {0.0}
        assert budget.summary()["model_calls"] == 4 and budget.summary()["tokens"] == 8
    finally:
        trials.close()
    assert _job_containers(cluster.engine.client, trials.job_id) == []
    assert _job_containers(sandbox.client, trials.job_id) == []


@pytest.mark.docker
@pytest.mark.slow
def test_a_node_that_dies_mid_run_has_its_trials_rerun_and_its_containers_removed(cluster, sandbox, tmp_path):
    from aes.sandbox.executors import trial_runner
    from aes.tasks import load_task

    cfg = _ray_cfg(cluster)
    trials = trial_runner(cfg.sandbox)
    tasks = [load_task(make_task(tmp_path, f"slow{i}", solve="sleep 6; echo 42 > /app/answer.txt\n"))
             for i in range(4)]
    for task in tasks:  # warm both nodes' image caches: the kill lands during agent phases
        assert trials.sandbox.build(task).image
    try:
        with ThreadPoolExecutor(len(tasks)) as pool:
            futures = [pool.submit(trials.run, t, OracleAgent()) for t in tasks]
            deadline = time.monotonic() + 60
            running: list[dict] = []
            while time.monotonic() < deadline:
                running = [c for c in cluster.engine.aes_containers() if c["Labels"].get("aes.role") == "trial"
                           and c["State"] == "running"]
                if running:
                    break
                time.sleep(0.2)
            assert running, "no trial reached the second node"
            time.sleep(1.0)
            killed_at = time.monotonic()
            cluster.worker.kill()
            results = [f.result(timeout=300) for f in futures]
        print(f"all trials back {time.monotonic() - killed_at:.1f} s after the node was killed")
        assert [r.outcome.value for r in results] == ["ok"] * len(tasks), [r.detail for r in results]
        assert [r.reward for r in results] == [1.0] * len(tasks)
        # what was running on the dead node ran again on the head, on the machine's own engine
        on_head = [r for r in results if r.agent_info["executor"]["docker_host"] == "unix:///var/run/docker.sock"]
        assert len(on_head) >= len(running)
    finally:
        trials.close()
    # the dead node's engine is still up (its machine's engine): its containers are gone
    assert cluster.engine.aes_containers() == []
    assert _job_containers(sandbox.client, trials.job_id) == []
    assert cluster.worker.proc.poll() is not None  # the node is gone (the head stays up until teardown)
