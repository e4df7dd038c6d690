"""vLLM as a real engine on CPU: one ``vllm serve`` (vLLM's CPU build, its own venv) of the tiny Qwen2
stand-in, started by aes's own server command and kept for the session.

Against it: the tool-call parser of the Qwen family turns a ``<tool_call>`` the model writes into a
native tool call that the agent runs in a Docker container; the server's sampling log-probs are the
trainer's on the same token ids; a DPPO update pushed through vLLM's in-place reload moves the
server's log-prob of a fixed completion to the trainer's new value. The preflight runs vLLM's own
model-config check for ``proposer=claude solver=qwen`` on a stand-in of Qwen3-8B's config.json.

Skipped without vLLM's CPU build (``AES_WITH_VLLM=1 bash launchers/setup.sh``) unless
``AES_REQUIRE_VLLM=1`` (CI), which makes a missing vLLM a failure.
"""

from __future__ import annotations

import dataclasses
import json
import re
import os
import time
from pathlib import Path

import pytest
import torch

from aes.cluster import vllm_env
from aes.config import AgentConfig, ClusterConfig, ConfigError, ModelConfig, TrainerConfig, compose_config

QWEN3_8B_CONFIG = {  # Qwen/Qwen3-8B's config.json (its published values; no download here)
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 12288, "max_position_embeddings": 40960,
    "max_window_layers": 36, "model_type": "qwen3", "num_attention_heads": 32, "num_hidden_layers": 36,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000,
    "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936}


def need_vllm():
    if vllm_env.installed():
        return
    if os.environ.get("AES_REQUIRE_VLLM") == "1":
        pytest.fail(f"AES_REQUIRE_VLLM=1 but vLLM's CPU build is not in {vllm_env.venv_dir()}: run "
                    "AES_WITH_VLLM=1 bash launchers/setup.sh")
    pytest.skip("vLLM's CPU build is not installed (AES_WITH_VLLM=1 bash launchers/setup.sh)")


def served_cfg(model_dir: Path, run_dir: Path, **solver):
    from aes.config import AesConfig

    s = ModelConfig(name="tiny-vllm", backend="openai_compatible", model=str(model_dir), logprobs=True,
                    temperature=1.0, max_tokens=48, context_length=2048, seed=0, **solver)
    return AesConfig(solver=s, proposer=s, run_dir=str(run_dir),
                     cluster=ClusterConfig(servers=1, backend="vllm", gpus_per_server=0, port=None,
                                           health_timeout_sec=600, stop_timeout_sec=20))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(config pointed at the server, model dir, its server spec): the tiny Qwen2 stand-in served by vLLM."""
    need_vllm()
    from aes.cluster.layout import Allocation, plan
    from aes.cluster.servers import ServerGroup
    from aes.cluster.session import server_specs, with_servers
    from aes.models.export import export_tiny

    root = tmp_path_factory.mktemp("vllm")
    model_dir = export_tiny(root / "tiny-qwen2")
    cfg = served_cfg(model_dir, root)
    alloc = Allocation(("localhost",), 0, ())
    specs = server_specs(cfg, alloc, plan(cfg.cluster, alloc), root)
    group = ServerGroup(specs, cfg.cluster.stop_timeout_sec, cfg.cluster.health_timeout_sec)
    start = time.monotonic()
    group.start()
    try:
        group.wait_healthy()
        print(f"\n[vllm] server healthy after {time.monotonic() - start:.0f} s: {' '.join(specs[0].command)}")
        yield with_servers(cfg, specs), model_dir, specs[0]
    finally:
        group.stop()


def test_the_qwen_family_is_served_with_its_tool_parser_and_the_cpu_settings(served):
    cfg, model_dir, spec = served
    cmd = spec.command
    assert cmd[1:3] == ["-m", vllm_env.SERVER_MODULE] and cmd[cmd.index("--model") + 1] == str(model_dir)
    assert cmd[cmd.index("--tool-call-parser") + 1] == "hermes" and "--enable-auto-tool-choice" in cmd
    assert cmd[cmd.index("--max-model-len") + 1] == "2048" and "--hf-overrides" not in cmd
    assert "--enforce-eager" in cmd and "--weight-transfer-config" not in cmd
    assert spec.env["VLLM_SERVER_DEV_MODE"] == "1" and spec.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert cfg.solver.use_tools is not False and cfg.solver.engine == "vllm"


def trainer_logprobs(model, prompt_ids, completion_ids, temperature=1.0):
    ids = torch.tensor([list(prompt_ids) + list(completion_ids)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1:-1].float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return logp.gather(-1, torch.tensor(completion_ids)[:, None])[:, 0]


def test_sampled_ids_and_logprobs_are_the_trainers(served):
    """mu from the server, pi recomputed by transformers on the same ids: the same distribution."""
    from transformers import AutoModelForCausalLM

    from aes.models import build_model

    cfg, model_dir, _ = served
    chat = build_model(cfg.solver)
    chat.health_check()
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    diffs, kl = [], []
    for question in ("list the files", "what is the answer", "run the tests"):
        result = chat.chat([{"role": "system", "content": "You are a helpful assistant."},
                            {"role": "user", "content": question}])
        assert result.prompt_token_ids and len(result.completion_token_ids) == len(result.completion_logprobs) > 0
        pi = trainer_logprobs(model, result.prompt_token_ids, result.completion_token_ids)
        mu = torch.tensor(result.completion_logprobs)
        diffs.append((pi - mu).abs())
        kl.append(float((mu - pi).mean()))  # the sample estimate of KL(mu || pi) per token
    diff = torch.cat(diffs)
    print(f"\n[vllm] {diff.numel()} tokens: max |mu - pi| {float(diff.max()):.2e} nats, KL {sum(kl) / len(kl):.2e}")
    assert float(diff.max()) < 1e-3


@pytest.mark.docker
def test_a_native_tool_call_is_parsed_by_the_server_and_run_by_the_agent(served, sandbox, cfg, tmp_path):
    """The served model writes ``<tool_call>{...}</tool_call>`` (forced by vLLM's structured outputs, so
    the random tiny model writes it deterministically); the server's hermes parser returns it as a
    native tool call and the agent runs it in the task's container."""
    from aes.agents import TerminalAgent
    from aes.models.openai_client import OpenAIChat
    from aes.sandbox import TrialRunner
    from aes.tasks import load_task
    from tests.conftest import make_task

    served_cfg_, _, _ = served
    call = r'<tool_call>\n\{"name": "bash", "arguments": \{"command": "echo [a-z]{4} > /app/answer\.txt"\}\}\n</tool_call>'

    class Forced(OpenAIChat):
        def request_params(self, messages, tools, max_tokens, temperature):
            params = super().request_params(messages, tools, max_tokens, temperature)
            params["extra_body"]["structured_outputs"] = {"regex": call}
            return params

    # the call is ~60 tokens of the tiny tokenizer: room for all of it
    model = Forced(dataclasses.replace(served_cfg_.solver, max_tokens=160))
    assert model.supports_tools
    task = make_task(tmp_path, test="#!/bin/bash\ntest -s /app/answer.txt && echo 1 > /logs/verifier/reward.txt "
                                    "|| echo 0 > /logs/verifier/reward.txt\n")
    result = TrialRunner(cfg.sandbox, sandbox).run(load_task(task), TerminalAgent(model, AgentConfig(max_turns=1)))
    steps = [s for s in result.agent_info["trajectory"]["steps"] if s["source"] == "agent"]
    [first] = steps
    assert first.get("tool_calls"), first["message"]
    [tool_call] = first["tool_calls"]
    command = tool_call["arguments"]["command"]
    assert tool_call["function_name"] == "bash" and re.fullmatch(r"echo [a-z]{4} > /app/answer\.txt", command)
    assert first["observation"]["results"][0]["extra"]["exit_code"] == 0
    assert first["metrics"]["completion_token_ids"] and len(first["metrics"]["logprobs"]) == len(
        first["metrics"]["completion_token_ids"])
    assert result.reward == 1.0, (command, str(result.detail)[:3000])


def test_a_dppo_update_pushed_into_the_running_server_moves_its_logprobs(served, tmp_path):
    """After one update the server (never restarted) gives a fixed completion the trainer's new log-prob."""
    from transformers import AutoModelForCausalLM

    from aes.models import build_model
    from aes.train import DPPOTrainer, build_weight_sync
    from aes.train.episodes import Episode, Group, Sample
    from aes.train.vllm_reload import VLLMReload, call, server_version

    cfg, model_dir, spec = served
    chat = build_model(cfg.solver)
    root = spec.url
    result = chat.chat([{"role": "user", "content": "show the files"}])
    prompt, completion = result.prompt_token_ids, result.completion_token_ids

    def server_logprobs() -> torch.Tensor:
        answer = call(root, "/v1/completions", {"model": cfg.solver.model, "prompt": prompt + completion,
                                                "max_tokens": 1, "prompt_logprobs": 0, "temperature": 1.0})
        rows = answer["choices"][0]["prompt_logprobs"][len(prompt):]
        return torch.tensor([next(iter(r.values()))["logprob"] for r in rows])

    before = server_logprobs()
    assert torch.allclose(before, torch.tensor(result.completion_logprobs), atol=1e-3)
    policy = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    trainer_cfg = TrainerConfig(lr=3e-2, envs_per_update=1, attempts_per_env=2, max_seq_len=512,
                                micro_batch_tokens=2048, temperature=1.0)
    sync = build_weight_sync(trainer_cfg, cfg.solver, rollout=chat, out_dir=tmp_path / "push", mode="vllm_reload")
    assert isinstance(sync, VLLMReload)
    trainer = DPPOTrainer(trainer_cfg, policy, sync)
    ids = prompt + completion
    good = Episode([Sample(ids, [0] * len(prompt) + [1] * len(completion), [0.0] * len(prompt) +
                           list(result.completion_logprobs))], reward=1.0)
    bad = Episode([Sample(ids, [0] * len(prompt) + [1] * len(completion), [0.0] * len(prompt) +
                          list(result.completion_logprobs))], reward=0.0)
    version = chat.weights_version
    from aes.agents import TerminalAgent
    from aes.config import BudgetConfig
    from aes.sandbox.ray_executor import _rebuild_agent, describe_agent

    submitted = describe_agent(TerminalAgent(chat, AgentConfig()))  # an attempt sent to a Ray worker now
    stats = trainer.update([Group("env", [good, bad])])
    assert stats["step"] == 1.0
    after = server_logprobs()
    new_pi = trainer_logprobs(trainer.engine.module.eval(), prompt, completion)
    moved = float((after - before).abs().max())
    print(f"\n[vllm] push: {sync.seconds}; server log-prob moved by up to {moved:.3f} nats, "
          f"now within {float((after - new_pi).abs().max()):.1e} of the trainer's")
    assert moved > 1e-2  # the update changed the policy, and the server serves the change
    assert torch.allclose(after, new_pi, atol=1e-3)
    assert chat.weights_version == version + 1 and server_version(root) == version + 1
    # the attempt submitted before the push, rebuilt on its worker (the Ray executor's own code): its
    # client follows the version the server reports, not the one it was submitted under
    assert submitted.weights_version == version
    _, worker_model = _rebuild_agent(submitted, BudgetConfig())
    assert worker_model is not chat and worker_model.server_versions
    assert worker_model.weights_version == version + 1
    assert worker_model.chat([{"role": "user", "content": "ls"}]).policy_version == version + 1
    assert not call(root, "/is_paused", method="GET")["is_paused"]
    trainer.close()


def qwen_cfg(tmp_path, *overrides):
    stand_in = tmp_path / "Qwen3-8B"
    stand_in.mkdir(exist_ok=True)
    (stand_in / "config.json").write_text(json.dumps(QWEN3_8B_CONFIG))
    return compose_config(["proposer=claude", "solver=qwen", f"cluster.model_config={stand_in}", *overrides])


def test_preflight_for_the_paper_line_serves_128k_with_yarn_and_vllm_accepts_it(tmp_path):
    """``proposer=claude solver=qwen``: Qwen3-8B reads 40,960 positions; 131,072 need YaRN (factor 4 over
    32,768, its model card), which goes to the server and the trainer; vLLM itself accepts it."""
    need_vllm()
    from aes.cluster.preflight import preflight
    from aes.models.families import trainer_overrides

    cfg = qwen_cfg(tmp_path)
    assert cfg.solver.model == "Qwen/Qwen3-8B" and cfg.solver.context_length == 131072
    report = preflight(cfg)
    print("\n" + "\n".join(report.lines))
    assert report.ok, report.lines
    cmd = report.command
    assert cmd[cmd.index("--max-model-len") + 1] == "131072"
    assert cmd[cmd.index("--tool-call-parser") + 1] == "hermes" and "--enable-auto-tool-choice" in cmd
    overrides = json.loads(cmd[cmd.index("--hf-overrides") + 1])
    assert overrides["rope_parameters"]["rope_type"] == "yarn" and overrides["rope_parameters"]["factor"] == 4.0
    assert overrides["rope_parameters"]["original_max_position_embeddings"] == 32768
    assert overrides["max_position_embeddings"] == 131072
    assert trainer_overrides(cfg.solver, cfg.cluster) == overrides
    assert any(line.startswith("vLLM accepts it: max_model_len 131072") for line in report.lines)


def test_preflight_stops_before_any_server_when_no_recipe_reaches_the_context(tmp_path):
    need_vllm()
    from aes.cluster.preflight import preflight
    from aes.cluster.session import server_specs
    from aes.cluster.layout import Allocation, plan

    cfg = qwen_cfg(tmp_path, "solver.context_length=262144")
    report = preflight(cfg)
    assert not report.ok and not report.command
    assert "solver.context_length=262144" in report.stop and "rope_scaling" in report.stop
    # and vLLM itself refuses the model's own config at 131,072 without the override
    from aes.cluster.preflight import vllm_accepts

    verdict = vllm_accepts(vllm_env.vllm_python(), str(tmp_path / "Qwen3-8B"), 131072, {})
    assert not verdict["ok"] and "max_model_len" in verdict["error"]
    # the job stops the same way before it starts a server
    job = qwen_cfg(tmp_path, "solver.context_length=262144", "cluster=vllm", "cluster.port=null")
    alloc = Allocation(("localhost",), 0, tuple(str(g) for g in range(8)))
    with pytest.raises(ConfigError, match="solver.context_length=262144"):
        server_specs(job, alloc, plan(job.cluster, alloc), tmp_path)
