"""The job on an allocation (aes/cluster): the split of SLURM's nodes and GPUs, server commands,
the session's start/health/teardown around a run, the guard, requests spread over servers, the
weight syncs the registry picks. Stand-in HTTP servers here; a real llama.cpp server in
tests/test_cluster_llamacpp.py and the whole job through submitit in tests/test_cluster_job.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from aes.cluster.layout import Allocation, expand_nodelist, master_port, plan
from aes.cluster.servers import ServerError, ServerGroup, active_group
from aes.cluster.session import Job, cluster_session, rank_env, server_specs, with_servers
from aes.config import CONF_DIR, AesConfig, ClusterConfig, ConfigError, ModelConfig, compose_config, load_config
from aes.config import register_schema
from tests.conftest import REPO

register_schema()

# A stand-in model server: answers every GET with 200 and its own argv (so a test sees what it was
# started with); exits at once when argv says "crash", never answers health when it says "mute".
STAND_IN = textwrap.dedent("""\
    import http.server as h, json, signal, sys, time
    port = int(sys.argv[1])
    if "crash" in sys.argv:
        print("stand-in: crashing on purpose", flush=True)
        sys.exit(7)
    if "mute" in sys.argv:
        time.sleep(600)
    class H(h.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"argv": sys.argv}).encode()
            self.send_response(200); self.send_header("content-length", str(len(body))); self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a): pass
    server = h.HTTPServer(("127.0.0.1", port), H)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    print("stand-in: serving", sys.argv[1:], flush=True)
    server.serve_forever()
""")


@pytest.fixture
def stand_in(tmp_path) -> Path:
    path = tmp_path / "stand_in.py"
    path.write_text(STAND_IN)
    return path


def port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


QWEN_LIKE = {"model_type": "qwen3", "max_position_embeddings": 40960, "rope_theta": 1000000, "tie_word_embeddings": False}


def served_cfg(tmp_path, **cluster) -> AesConfig:
    """A served solver ``org/model`` (not on this machine: its config.json is a stand-in, cluster.model_config)."""
    solver = ModelConfig(name="served", backend="openai_compatible", model="org/model", logprobs=True)
    (tmp_path / "org-model-config.json").write_text(json.dumps(QWEN_LIKE))
    cluster.setdefault("model_config", str(tmp_path / "org-model-config.json"))
    return AesConfig(solver=solver, proposer=solver, cluster=ClusterConfig(**cluster), run_dir=str(tmp_path))


# ---------------------------------------------------------------------------- the allocation

def test_slurm_node_lists_expand():
    assert expand_nodelist("gpu[01-03,07],cpu5") == ["gpu01", "gpu02", "gpu03", "gpu07", "cpu5"]
    assert expand_nodelist("node7") == ["node7"]
    assert expand_nodelist("a[8-10]-ib") == ["a8-ib", "a9-ib", "a10-ib"]


def test_allocation_reads_slurms_own_variables():
    env = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "gpu[11-12]", "SLURM_NODEID": "1", "SLURM_NTASKS": "2",
           "SLURM_STEP_ID": "0",
           "SLURM_RESTART_COUNT": "3", "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    alloc = Allocation.detect(ClusterConfig(), env)
    assert alloc.hostnames == ("gpu11", "gpu12") and alloc.node == 1 and len(alloc.gpus) == 8
    assert alloc.session == "4242.3"  # a requeued job is a new session of the same run dir
    laptop = Allocation.detect(ClusterConfig(), {})
    assert len(laptop.hostnames) == 1 and laptop.node == 0 and not laptop.slurm
    with pytest.raises(ConfigError, match="tasks_per_node: 1"):
        Allocation.detect(ClusterConfig(), {**env, "SLURM_NTASKS": "16"})
    assert Allocation.detect(ClusterConfig(gpus_per_node=2), {}).gpus == ("0", "1")
    shell = {k: v for k, v in env.items() if k != "SLURM_STEP_ID"}  # salloc's shell or the batch script
    assert Allocation.detect(ClusterConfig(), shell).hostnames == laptop.hostnames


def alloc(nodes: int = 1, gpus: int = 8, node: int = 0) -> Allocation:
    return Allocation(tuple(f"n{i}" for i in range(nodes)), node, tuple(str(g) for g in range(gpus)), "77")


def test_one_node_splits_between_servers_and_trainer_ranks():
    layout = plan(ClusterConfig(servers=2, gpus_per_server=2), alloc())
    assert [s.gpus for s in layout.servers] == [("0", "1"), ("2", "3")]
    assert [s.port for s in layout.servers] == [8000, 8001]
    assert [(r.rank, r.local_rank, r.gpu) for r in layout.ranks] == [(0, 0, "4"), (1, 1, "5"), (2, 2, "6"), (3, 3, "7")]
    assert layout.leader_node == 0 and layout.world_size == 4


def test_training_spans_nodes_where_asked():
    layout = plan(ClusterConfig(servers=2, gpus_per_server=2, trainer_nodes=2), alloc(nodes=2))
    assert layout.world_size == 12 and [r.node for r in layout.ranks].count(1) == 8
    assert [r.local_rank for r in layout.ranks_on(1)] == list(range(8))
    env = rank_env(layout, alloc(nodes=2), 5, 29500)  # node 1's second rank
    assert env == {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "12", "MASTER_ADDR": "n0", "MASTER_PORT": "29500"}


def test_a_node_full_of_servers_leaves_the_flywheel_to_the_next():
    layout = plan(ClusterConfig(servers=8, gpus_per_server=1), alloc(nodes=2))
    assert {s.node for s in layout.servers} == {0} and layout.leader_node == 1 and layout.world_size == 8
    moved = plan(ClusterConfig(servers=3, gpus_per_server=4), alloc(nodes=2))  # a server never spans nodes
    assert [s.node for s in moved.servers] == [0, 0, 1] and moved.leader_node == 1


def test_plans_that_cannot_work_are_refused_with_the_key():
    with pytest.raises(ConfigError, match="do not fit"):
        plan(ClusterConfig(servers=3, gpus_per_server=4), alloc())
    with pytest.raises(ConfigError, match="trainer_nodes=2"):
        plan(ClusterConfig(servers=1, trainer_nodes=2), alloc())
    with pytest.raises(ConfigError, match="needs GPUs"):
        plan(ClusterConfig(servers=1), alloc(gpus=0))
    with pytest.raises(ConfigError, match="cluster.port"):
        plan(ClusterConfig(servers=8, port=None), alloc(nodes=2))
    with pytest.raises(ConfigError, match="llama.cpp servers"):
        plan(ClusterConfig(servers=8, backend="llamacpp"), alloc(nodes=2))


def test_cpu_node_runs_llamacpp_servers_and_one_trainer_rank():
    layout = plan(ClusterConfig(servers=2, backend="llamacpp", gpus_per_server=0), alloc(gpus=0))
    assert [s.gpus for s in layout.servers] == [(), ()] and [r.gpu for r in layout.ranks] == [None]
    two = plan(ClusterConfig(trainer_gpus_per_node=2), alloc(gpus=0))
    assert [r.rank for r in two.ranks] == [0, 1]


def test_master_port_follows_the_job():
    a, b = alloc(), Allocation(("n0",), 0, (), "78")
    assert master_port(ClusterConfig(), a) != master_port(ClusterConfig(), b)
    assert master_port(ClusterConfig(master_port=1234), a) == 1234


# ---------------------------------------------------------------------------- commands and config

def test_vllm_servers_get_their_gpus_and_the_weight_transfer_flags(tmp_path):
    cfg = served_cfg(tmp_path, servers=2, gpus_per_server=2, extra_args=["--seed", "3"])
    cfg.solver.context_length = 32768
    a = alloc(nodes=2, node=0)
    specs = server_specs(cfg, a, plan(cfg.cluster, a), tmp_path)
    first = specs[0]
    assert first.env["CUDA_VISIBLE_DEVICES"] == "0,1" and first.env["VLLM_SERVER_DEV_MODE"] == "1"
    cmd = " ".join(first.command)
    assert " -m vllm.entrypoints.launchers.api_server.entry --model org/model" in cmd
    assert "--tensor-parallel-size 2" in cmd and "--port 8000" in cmd
    assert "--weight-transfer-config" in cmd and "--logprobs-mode processed_logprobs" in cmd
    assert "--max-model-len 32768" in cmd and "--hf-overrides" not in cmd  # within the model's 40,960 positions
    assert "--tool-call-parser hermes" in cmd and cmd.endswith("--seed 3") and "--served-model-name org/model" in cmd
    assert first.base_url == "http://127.0.0.1:8000/v1" and first.bind_host == "127.0.0.1"
    assert first.log == tmp_path / "servers" / "server-0.log"
    pointed = with_servers(cfg, specs)
    assert pointed.solver.base_urls == ["http://127.0.0.1:8000/v1", "http://127.0.0.1:8001/v1"]
    assert pointed.solver.base_url == pointed.solver.base_urls[0] and pointed.solver.engine == "vllm"


def test_servers_on_another_node_are_reached_by_its_host_name(tmp_path):
    cfg = served_cfg(tmp_path, servers=8, gpus_per_server=1)
    a = alloc(nodes=2, node=1)  # the flywheel's node
    specs = server_specs(cfg, a, plan(cfg.cluster, a), tmp_path)
    assert all(s.remote and s.client_host == "n0" and s.bind_host == "0.0.0.0" for s in specs)


def test_custom_server_command_placeholders(tmp_path):
    cfg = served_cfg(tmp_path, servers=1, command=["sglang", "--model={model}", "--port", "{port}", "--tp", "{tp}"],
                     port=9000)
    a = alloc(gpus=2)
    [spec] = server_specs(cfg, a, plan(cfg.cluster, a), tmp_path)
    assert spec.command == ["sglang", "--model=org/model", "--port", "9000", "--tp", "1"]
    bad = served_cfg(tmp_path, servers=1, command=["serve", "{nope}"])
    with pytest.raises(ConfigError, match="placeholders"):
        server_specs(bad, a, plan(bad.cluster, a), tmp_path)


def test_llamacpp_servers_serve_the_solvers_gguf(tmp_path):
    cfg = served_cfg(tmp_path, servers=1, backend="llamacpp", gpus_per_server=0, port=None)
    cfg.solver.model, cfg.solver.threads, cfg.solver.context_length = "smollm2-135m-instruct", 1, 2048
    a = alloc(gpus=0)
    [spec] = server_specs(cfg, a, plan(cfg.cluster, a), tmp_path)
    assert spec.command[:3] == [sys.executable, "-m", "aes.cluster.llamacpp_server"]
    assert spec.model.endswith(".gguf") and spec.command[spec.command.index("--model") + 1] == spec.model
    assert spec.command[spec.command.index("--alias") + 1] == "smollm2-135m-instruct"
    assert spec.port > 0 and "--threads" in spec.command
    cfg.solver.model = "org/not-a-gguf"
    with pytest.raises(ConfigError, match="GGUF"):
        server_specs(cfg, a, plan(cfg.cluster, a), tmp_path)


@pytest.mark.parametrize("option", sorted(p.stem for p in (CONF_DIR / "cluster").glob("*.yaml")))
def test_every_cluster_option_composes(option):
    cluster = compose_config([f"cluster={option}"]).cluster
    assert cluster.active == (option != "none")


def test_the_slurm_profile_brings_its_split_and_the_command_line_holds():
    slurm = CONF_DIR.parent / "slurm"
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        raw = compose(config_name="config", return_hydra_config=True,
                      overrides=[f"hydra.searchpath=[file://{slurm}]", "hydra/launcher=example_cluster",
                                 "experiment=paper_frontier", "cluster.trainer_nodes=2"])
        launcher = raw.hydra.launcher
        assert launcher.tasks_per_node == 1 and launcher.max_num_timeout > 0  # one task per node; requeue
        from omegaconf import open_dict

        with open_dict(raw):
            del raw["hydra"]
        cluster = load_config(raw).cluster
    assert (cluster.servers, cluster.gpus_per_server, cluster.backend) == (2, 2, "vllm")
    assert cluster.trainer_nodes == 2 and "--max-model-len" in cluster.extra_args
    assert compose_config(["experiment=paper_frontier"]).cluster.active is False  # no profile: nothing starts


def test_cluster_cpu_experiment_is_a_served_gguf_solver():
    cfg = compose_config(["experiment=cluster_cpu"])
    assert (cfg.solver.backend, cfg.solver.engine, cfg.solver.use_tools) == ("openai_compatible", "llamacpp", False)
    assert cfg.cluster.backend == "llamacpp" and cfg.cluster.servers == 1
    from aes.train.backends import SOLVER_BACKENDS

    assert SOLVER_BACKENDS["openai_compatible"].default_sync(cfg.solver) == "llamacpp_server"
    # vLLM: NCCL from a GPU trainer, the in-place reload from a CPU one (this machine)
    expected = "vllm_server" if torch.cuda.is_available() else "vllm_reload"
    assert SOLVER_BACKENDS["openai_compatible"].default_sync(compose_config(["solver=qwen"]).solver) == expected
    vllm_cpu = compose_config(["experiment=cluster_vllm_cpu"])
    assert vllm_cpu.trainer.weight_sync == "vllm_reload" and vllm_cpu.cluster.gpus_per_server == 0
    assert SOLVER_BACKENDS["openai_compatible"].default_sync(vllm_cpu.solver) == expected  # engine vllm, not GGUF


def test_llamacpp_weight_sync_needs_the_servers_of_this_job():
    from aes.config import TrainerConfig
    from aes.train.sync import build_weight_sync

    solver = ModelConfig(name="s", backend="openai_compatible", model="smollm2-135m-instruct", base_url="http://x/v1")
    with pytest.raises(ConfigError, match="cluster.servers"):
        build_weight_sync(TrainerConfig(), solver, mode="llamacpp_server")


def test_several_vllm_servers_get_one_sync_each():
    from aes.config import TrainerConfig
    from aes.train.sync import VLLMServers, build_weight_sync

    solver = ModelConfig(name="s", backend="openai_compatible", model="m",
                         base_urls=["http://a:8000/v1", "http://a:8001/v1"])
    sync = build_weight_sync(TrainerConfig(vllm_group_port=6000), solver, mode="vllm_server")
    assert isinstance(sync, VLLMServers)
    assert [(s.base_url, s.group_port) for s in sync.servers] == [("http://a:8000", 6000), ("http://a:8001", 6001)]


# ---------------------------------------------------------------------------- the session

def stand_in_cfg(tmp_path, stand_in, *extra, **cluster) -> AesConfig:
    command = [sys.executable, str(stand_in), "{port}", "{model}", *extra]
    return served_cfg(tmp_path, **{"servers": 2, "gpus_per_server": 0, "port": None, "command": command,
                                   "health_timeout_sec": 20, "stop_timeout_sec": 5, **cluster})


def test_session_starts_servers_points_the_solver_and_stops_them(tmp_path, stand_in):
    cfg = stand_in_cfg(tmp_path, stand_in)
    seen = {}

    def dispatch(job_cfg, run_dir):
        seen["urls"] = job_cfg.solver.base_urls
        seen["answers"] = [json.loads(_get(u.removesuffix("/v1") + "/health"))["argv"] for u in job_cfg.solver.base_urls]
        seen["active"] = active_group() is not None
        return True

    with cluster_session(cfg, tmp_path) as job:
        assert job.role == "leader"
        assert job.run(dispatch)
    ports = [int(u.split(":")[2].split("/")[0]) for u in seen["urls"]]
    assert len(ports) == 2 and seen["active"] and all(a[2] == "org/model" for a in seen["answers"])
    assert not any(port_open(p) for p in ports) and active_group() is None
    assert json.loads((tmp_path / "cluster" / "finished-local.0").read_text())["status"] == "ok"
    logs = sorted((tmp_path / "servers").glob("server-*.log"))
    assert len(logs) == 2 and "=== aes: start 1 of server 0" in logs[0].read_text()


def _get(url: str) -> str:
    from aes.cluster.servers import http_get

    status, body = http_get(url)
    assert status == 200
    return body.decode()


def test_a_failed_run_still_stops_every_server(tmp_path, stand_in):
    cfg = stand_in_cfg(tmp_path, stand_in)
    ports = []

    def dispatch(job_cfg, run_dir):
        ports.extend(int(u.split(":")[2].split("/")[0]) for u in job_cfg.solver.base_urls)
        raise SystemExit(-1)  # what submitit's requeue does on preemption

    with pytest.raises(SystemExit):
        with cluster_session(cfg, tmp_path) as job:
            job.run(dispatch)
    assert ports and not any(port_open(p) for p in ports)
    assert json.loads((tmp_path / "cluster" / "finished-local.0").read_text())["status"] == "failed"


def test_a_server_that_dies_names_its_url_and_log(tmp_path, stand_in):
    cfg = stand_in_cfg(tmp_path, stand_in, "crash", servers=1)
    with pytest.raises(ServerError) as err:
        with cluster_session(cfg, tmp_path):
            pass
    message = str(err.value)
    assert "exited with status 7" in message and "/health" in message
    assert str(tmp_path / "servers" / "server-0.log") in message and "crashing on purpose" in message


def test_a_server_that_never_answers_times_out_with_its_url_and_log(tmp_path, stand_in):
    cfg = stand_in_cfg(tmp_path, stand_in, "mute", servers=1, health_timeout_sec=2)
    started = time.monotonic()
    with pytest.raises(ServerError, match=r"did not answer http://127\.0\.0\.1:\d+/health within 2 s") as err:
        with cluster_session(cfg, tmp_path):
            pass
    assert "server-0.log" in str(err.value) and time.monotonic() - started < 30


def test_a_taken_port_is_refused_before_starting(tmp_path, stand_in):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        cfg = stand_in_cfg(tmp_path, stand_in, servers=1, port=busy.getsockname()[1])
        with pytest.raises(ServerError, match="port is taken"):
            with cluster_session(cfg, tmp_path):
                pass


def test_reload_restarts_each_server_on_its_port_with_the_new_model(tmp_path, stand_in):
    cfg = stand_in_cfg(tmp_path, stand_in)
    a = alloc(gpus=0)
    specs = server_specs(cfg, a, plan(cfg.cluster, a), tmp_path)
    group = ServerGroup(specs, stop_timeout=5, health_timeout=20)
    try:
        group.start()
        group.wait_healthy()
        group.reload(tmp_path / "policy-v1.gguf")
        for spec in group.specs:
            argv = json.loads(_get(spec.health_url))["argv"]
            assert argv[1:3] == [str(spec.port), str(tmp_path / "policy-v1.gguf")]
    finally:
        group.stop()
    assert "=== aes: start 2 of server 1" in (tmp_path / "servers" / "server-1.log").read_text()


def test_no_cluster_section_is_a_plain_run(tmp_path):
    cfg = compose_config([])
    with cluster_session(cfg, tmp_path) as job:
        assert job.role == "leader" and job.cfg is cfg
    assert not (tmp_path / "cluster").exists()


def test_the_guard_stops_a_server_whose_job_was_killed(tmp_path, stand_in):
    """kill -9 of the job skips its teardown: the guard notices and stops the server."""
    port_file = tmp_path / "port"
    job = textwrap.dedent(f"""\
        import sys, time
        from pathlib import Path
        from aes.cluster.servers import ServerProcess, ServerSpec, free_port, wait_healthy
        port = free_port()
        spec = ServerSpec(0, "vllm", "m", [sys.executable, {str(stand_in)!r}, str(port)], {{}}, "127.0.0.1", port,
                          "127.0.0.1", Path({str(tmp_path / 'server.log')!r}))
        proc = ServerProcess(spec)
        proc.start()
        wait_healthy([spec], {{0: proc}}, 20)
        Path({str(port_file)!r}).write_text(str(port))
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", job], cwd=REPO)
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        port = int(port_file.read_text())
        assert port_open(port)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 20
    while port_open(port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not port_open(port)


def test_servers_only_node_waits_for_the_finished_marker(tmp_path):
    marker = tmp_path / "finished-x"
    job = Job(compose_config([]), "servers", tmp_path, None, marker)
    threading.Timer(0.5, lambda: marker.write_text("{}")).start()
    started = time.monotonic()
    assert job.run(lambda *a: pytest.fail("a servers-only node runs no mode"))
    assert time.monotonic() - started < 10


# ---------------------------------------------------------------------------- several servers

class FakeServer:
    """An OpenAI-compatible chat endpoint that answers with its own name."""

    def __init__(self, name: str):
        self.name, self.calls = name, 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length") or 0))
                outer.calls += 1
                time.sleep(0.05)
                body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                   "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": f"from {outer.name}"}}],
                                   "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def test_requests_spread_over_servers_and_an_episode_stays_on_one(monkeypatch):
    from aes.models.openai_client import OpenAIChat

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    servers = [FakeServer("a"), FakeServer("b")]
    try:
        chat = OpenAIChat(ModelConfig(name="s", backend="openai_compatible", model="m", max_retries=0,
                                      base_urls=[s.url for s in servers]))
        assert chat.endpoints == [s.url for s in servers]
        first = [{"role": "user", "content": f"task {i}"} for i in range(4)]
        threads = [threading.Thread(target=chat.chat, args=([m],)) for m in first]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert servers[0].calls == servers[1].calls == 2  # least busy first, ties round robin
        # an episode's next turn goes to the server of its first turn (its prefix cache)
        history = [{"role": "user", "content": "solo"}]
        reply = chat.chat(history).text
        for _ in range(3):
            history += [{"role": "assistant", "content": reply}, {"role": "user", "content": "go on"}]
            assert chat.chat(history).text == reply
    finally:
        for s in servers:
            s.httpd.shutdown()
