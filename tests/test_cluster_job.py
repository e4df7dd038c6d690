"""The job on its allocation, end to end on CPU, nothing mocked.

A multirun through submitit's local executor (hydra/launcher=local) whose job starts aes's
llama.cpp server on the embedded SmolLM2 GGUF (cluster=llamacpp, the stand-in for vLLM), rolls the
solver out through the ``openai_compatible`` backend against it (exact ids and log-probs from the
server), takes one DPPO update of a transformers copy loaded from the same GGUF, pushes the weights
(re-exported GGUF, server restarted on its port) and stops the server. And two trainer ranks on one
machine: rank 0 runs the mode, rank 1 follows its update, and the weights are those one rank gets.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from aes.report.metrics import read_metrics
from tests.conftest import FIXTURES, REPO

SEEDS = FIXTURES.parent / "flywheel_seeds"


def port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def server_processes(port: int) -> list[str]:
    """Command lines of processes still serving on ``port`` (aes's llama.cpp server or its guard)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        text = b" ".join(args).decode(errors="replace")
        if "aes.cluster.llamacpp_server" in text and f"--port {port}" in text:
            found.append(text)
    return found


@pytest.mark.docker
@pytest.mark.slow
def test_the_job_serves_the_solver_trains_pushes_weights_and_stops(sandbox, tmp_path):
    sweep = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "aes.run", "-m", "hydra/launcher=local", "experiment=cluster_cpu",
           f"domain.seeds={SEEDS}", "flywheel.assignments_per_round=0",
           # one update: 1 env x 6 coin-flip attempts (a group without spread: 2/64, then the other env)
           "trainer.envs_per_update=1", "trainer.attempts_per_env=6", "trainer.lr=1e-5",
           "agent.max_turns=2", "solver.max_tokens=48", "solver.context_length=2048",
           f"hydra.sweep.dir={sweep}", "hydra.launcher.timeout_min=20"]
    env = {**os.environ, "DS_ACCELERATOR": "cpu"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=1500, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (sweep / ".submitit").is_dir()  # the job went through submitit
    run = sweep / "0"

    # the server: started, healthy, restarted with the trained weights on the same port, stopped
    log = (run / "servers" / "server-0.log").read_text()
    starts = re.findall(r"=== aes: start (\d) of server 0 .*--port (\d+)", log)
    assert [s[0] for s in starts] == ["1", "2"] and starts[0][1] == starts[1][1]
    assert str(run / "checkpoints" / "gguf" / "policy-v1.gguf") in log.split("=== aes: start 2")[1]
    assert log.count("stopping") == 2
    port = int(starts[0][1])
    assert not port_open(port) and server_processes(port) == []
    assert json.loads(next((run / "cluster").glob("finished-*")).read_text())["status"] == "ok"

    # the solver was served over the OpenAI protocol with exact ids and mu, and trained on them
    [server] = json.loads((run / "cluster" / "servers.json").read_text())["servers"]
    assert server["base_url"] == f"http://127.0.0.1:{port}/v1" and server["backend"] == "llamacpp"
    assert "backend: openai_compatible" in (run / "config.yaml").read_text()
    steps = [s for p in (run / "trajectories").rglob("[0-9]*.json")
             for s in json.loads(p.read_text())["steps"] if s.get("source") == "agent"]
    assert steps and all(len(s["metrics"]["logprobs"]) == len(s["metrics"]["completion_token_ids"]) > 0
                         and s["metrics"]["prompt_token_ids"] for s in steps)
    [update] = [r for r in read_metrics(run / "metrics.jsonl") if r["event"] == "update"]
    assert update["dppo/groups_kept"] >= 1
    # mu (llama.cpp on the shipped Q4_1 file) vs pi (transformers on its dequantised weights)
    assert update["dppo/kl_rollout"] < 0.05 and update["dppo/masked_fraction"] < 0.05


def _trajectories(root: Path) -> Path:
    """Two envs x 4 attempts of one model call each, rewards 0/1: tiny-model ids, fixed log-probs."""
    rng = random.Random(0)
    for env in ("env-a", "env-b"):
        folder = root / "trajectories" / env / "tiny"
        folder.mkdir(parents=True)
        for k in range(4):
            prompt = [rng.randrange(3, 200) for _ in range(12)]
            completion = [rng.randrange(3, 200) for _ in range(8)]
            step = {"step_id": 1, "source": "agent", "metrics": {
                "prompt_token_ids": prompt, "completion_token_ids": completion, "logprobs": [-5.0] * 8}}
            (folder / f"{k}.json").write_text(json.dumps({"steps": [step], "extra": {"reward": float(k % 2)}}))
    return root / "trajectories"


def _train(tmp_path: Path, trajectories: Path, name: str, *extra: str, solver: str = "tiny",
           accelerator: str = "cpu") -> Path:
    run = tmp_path / name
    cmd = [sys.executable, "-m", "aes.run", "mode=train", f"solver={solver}", f"trajectories={trajectories}",
           "trainer.envs_per_update=2", "trainer.attempts_per_env=4", "trainer.lr=1e-3",
           "trainer.max_seq_len=64", "trainer.micro_batch_tokens=64", "trainer.deepspeed.gradient_clipping=0",
           f"hydra.run.dir={run}", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=1200,
                          env={**os.environ, "DS_ACCELERATOR": accelerator})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return run


def _weights(run: Path) -> dict:
    [states] = (run / "checkpoints").glob("step_*/mp_rank_00_model_states.pt")
    return torch.load(states, map_location="cpu", weights_only=False)["module"]


@pytest.mark.slow
def test_two_trainer_ranks_train_what_one_rank_trains(tmp_path):
    trajectories = _trajectories(tmp_path)
    one = _train(tmp_path, trajectories, "one")
    two = _train(tmp_path, trajectories, "two", "cluster.trainer_gpus_per_node=2")
    rank_log = (two / "cluster" / "rank-1.log").read_text()
    assert "trainer rank 1 of 2 joined" in rank_log and "trainer rank 1: 1 update(s)" in rank_log
    [u1] = [r for r in read_metrics(one / "metrics.jsonl") if r["event"] == "update"]
    [u2] = [r for r in read_metrics(two / "metrics.jsonl") if r["event"] == "update"]
    assert 0 < u2["dppo/trained_tokens"] < u1["dppo/trained_tokens"]  # rank 0 ran only its share
    a, b = _weights(one), _weights(two)
    assert a.keys() == b.keys()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)  # rank 1 trained its half of the batch
    assert not (tmp_path / "one" / "cluster").exists()


@pytest.mark.gpu
@pytest.mark.slow
def test_vllm_server_on_one_gpu_trainer_on_the_other(tmp_path):
    """The job with cluster.backend=vllm: a vLLM server on GPU 0 serves the solver, DeepSpeed trains on
    GPU 1 from stored trajectories, the weights go into the running server over NCCL, all stops."""
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA GPUs")
    pytest.importorskip("vllm")
    from aes.models.tiny import build_model, build_tokenizer

    model_dir = tmp_path / "m"
    tokenizer = build_tokenizer()
    build_model("tiny-qwen2", len(tokenizer), seed=13, eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    run = _train(tmp_path, _trajectories(tmp_path), "vllm", "solver.name=tiny", f"solver.model={model_dir}",
                 "solver.context_length=2048", "cluster.servers=1", "cluster.gpus_per_server=1",
                 "cluster.gpus_per_node=2", "cluster.port=null", "cluster.health_timeout_sec=900",
                 "cluster.extra_args=[--enforce-eager,--gpu-memory-utilization,'0.3',--max-model-len,'2048']",
                 solver="qwen", accelerator="cuda")
    [server] = json.loads((run / "cluster" / "servers.json").read_text())["servers"]
    assert server["gpus"] == ["0"] and server["backend"] == "vllm"
    port = int(server["base_url"].split(":")[2].split("/")[0])
    assert not port_open(port)
    [update] = [r for r in read_metrics(run / "metrics.jsonl") if r["event"] == "update"]
    assert update["dppo/sync_seconds"] > 0  # the weights went into the running server
