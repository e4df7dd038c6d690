"""The ``cluster=vllm`` job on CPU, end to end through submitit's local executor, nothing mocked.

``experiment=cluster_vllm_cpu`` with the tiniest model that proves the point (the tiny Qwen2 stand-in,
exported here; the experiment's default, the embedded SmolLM2, runs in ``benchmarks/rollout.py --engines``
and by hand: same code, ~3x the minutes): the job starts ``vllm serve`` on it (vLLM's CPU build, its own
venv; the Qwen family's hermes tool parser) and health-checks it, rolls the solver out
through the ``openai_compatible`` backend against it (vLLM's token ids and sampling log-probs), takes
one DPPO update of a transformers copy of the same weights and pushes them into the running server by
vLLM's in-place reload (the server paused and resumed around it, never restarted), then stops it.
Attempts run in the background pool (``flywheel.carry_unfinished``): those in flight during the push
are held between model calls and go on under the new weights.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from aes.report.metrics import read_metrics
from tests.conftest import FIXTURES, REPO
from tests.test_cluster_job import port_open
from tests.test_vllm import need_vllm

SEEDS = FIXTURES.parent / "flywheel_seeds"


@pytest.mark.docker
@pytest.mark.slow
def test_the_vllm_job_serves_trains_pushes_into_the_running_server_and_stops(sandbox, tmp_path):
    need_vllm()
    from aes.models.export import export_tiny

    model = export_tiny(tmp_path / "tiny-qwen2")
    sweep = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "aes.run", "-m", "hydra/launcher=local", "experiment=cluster_vllm_cpu",
           f"solver.model={model}", "solver.name=tiny", "trainer.lr=1e-3",
           f"domain.seeds={SEEDS}", "flywheel.assignments_per_round=0",
           "trainer.envs_per_update=1", "trainer.attempts_per_env=6",
           "agent.max_turns=2", "solver.max_tokens=48", "solver.context_length=2048",
           f"hydra.sweep.dir={sweep}", "hydra.launcher.timeout_min=25"]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=1800,
                          env={**os.environ, "DS_ACCELERATOR": "cpu"})
    print(f"\n[vllm job] {time.monotonic() - start:.0f} s")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (sweep / ".submitit").is_dir()
    run = sweep / "0"

    # one vLLM server: started once (never restarted), healthy, reloaded in place, stopped
    log = (run / "servers" / "server-0.log").read_text()
    starts = re.findall(r"=== aes: start (\d) of server 0 at .*?vllm\.entrypoints\.launchers\.api_server\.entry"
                        r".*?--port (\d+)", log)
    assert [s[0] for s in starts] == ["1"], starts
    port = int(starts[0][1])
    assert "POST /pause?mode=keep" in log and "POST /collective_rpc" in log and "POST /resume" in log
    assert "Reloading weights inplace" in log
    assert not port_open(port)
    assert json.loads(next((run / "cluster").glob("finished-*")).read_text())["status"] == "ok"
    [server] = json.loads((run / "cluster" / "servers.json").read_text())["servers"]
    assert server["backend"] == "vllm" and "--enforce-eager" in server["command"]
    assert "--tool-call-parser hermes" in " ".join(server["command"])  # the Qwen family's parser

    # rollouts with vLLM's ids and mu, and a DPPO update whose mu agrees with the trainer's pi
    steps = [s for p in (run / "trajectories").rglob("[0-9]*.json")
             for s in json.loads(p.read_text())["steps"] if s.get("source") == "agent"]
    assert steps and all(len(s["metrics"]["logprobs"]) == len(s["metrics"]["completion_token_ids"]) > 0
                         and s["metrics"]["prompt_token_ids"] for s in steps)
    updates = [r for r in read_metrics(run / "metrics.jsonl") if r["event"] == "update"]
    assert updates and updates[0]["dppo/groups_kept"] >= 1
    u = updates[0]
    print(f"[vllm job] kl_rollout {u['dppo/kl_rollout']:.2e}, ratio pi/mu in [{u['dppo/ratio_min']:.7f}, "
          f"{u['dppo/ratio_max']:.7f}], masked {u['dppo/masked_fraction']:.3f}")
    # fp32 serving and training of the same weights: the same distribution
    assert updates[0]["dppo/kl_rollout"] < 1e-3 and updates[0]["dppo/masked_fraction"] == 0.0
    versions = {(s.get("extra") or {}).get("policy_version") for s in steps}
    assert 0 in versions
