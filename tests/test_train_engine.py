"""DPPOTrainer on the DeepSpeed engine (CPU: the CPU accelerator and gloo): the update matches
the loss it claims, micro-batching changes nothing, checkpoints resume, the rollout engine
samples from the new weights, and a tiny model learns a toy verifiable task.

The first test of a fresh machine pays DeepSpeed's shm_comm build unless CI ran
``python -m aes.train.warm_ops``.
"""

from __future__ import annotations

import copy
import os

import pytest
import torch

from aes.config import TrainerConfig
from aes.config.schema import DeepSpeedConfig
from aes.models.hf_chat import Policy, sample_tokens
from aes.models.tiny import build_model
from aes.train import (
    CopyWeights,
    DPPOTrainer,
    Episode,
    Group,
    GroupBatcher,
    Sample,
    dppo_loss,
)
from aes.train.advantages import advantage_samples
from aes.train.batching import collate
from aes.train.dppo import token_logprobs

os.environ.setdefault("DS_ACCELERATOR", "cpu")

VOCAB = 32
TARGETS = {0: range(4), 1: range(4, 8), 2: range(8, 12), 3: range(12, 16)}
"""Toy verifiable task on a 32-token vocabulary: env k rewards the share of generated tokens in
its block of 4 ids (a random policy scores ~1/8)."""


def fresh_policy(seed: int = 0) -> Policy:
    """A tiny Qwen2 (aes.models.tiny preset) of its own, with the toy vocabulary; the cached
    TinyChat policy is never trained here."""
    model = build_model("tiny-qwen2", VOCAB, seed=seed, eos_token_id=VOCAB - 1, pad_token_id=VOCAB - 2)
    return Policy(model=model, tokenizer=None, name=f"toy@{seed}")


def config(**overrides) -> TrainerConfig:
    ds = overrides.pop("deepspeed", {})
    base = {"lr": 1e-3, "envs_per_update": 4, "attempts_per_env": 8, "max_seq_len": 64, "micro_batch_tokens": 256,
            "temperature": 1.0}
    return TrainerConfig(**(base | overrides), deepspeed=DeepSpeedConfig(**({"zero_stage": 0} | ds)))


def rollout(policy: Policy, env: int, attempts: int, gen: torch.Generator, new_tokens: int = 8) -> Group:
    """Attempts sampled by the rollout engine (hf_chat.sample_tokens on the shared module)."""
    prompt = [20 + env, 24, 25]
    episodes = []
    with policy.eval_mode():
        for _ in range(attempts):
            s = sample_tokens(policy.model, prompt, max_new_tokens=new_tokens, temperature=1.0,
                              eos_token_ids=[], generator=gen)
            reward = sum(t in TARGETS[env] for t in s.token_ids) / len(s.token_ids)
            episodes.append(Episode([Sample(prompt + s.token_ids, [0] * len(prompt) + [1] * len(s.token_ids),
                                            [0.0] * len(prompt) + s.logprobs)], reward))
    return Group(f"env{env}", episodes)


@torch.no_grad()
def batched_rollout(policy: Policy, env: int, attempts: int, gen: torch.Generator, new_tokens: int = 8) -> Group:
    """``rollout`` with all attempts sampled at once (the same per-token distribution and mu
    as sample_tokens: log_softmax(logits / T) in fp32), for speed."""
    ids = torch.tensor([[20 + env, 24, 25]] * attempts)
    logps = []
    with policy.eval_mode():
        for _ in range(new_tokens):
            logp = torch.log_softmax(policy.model(input_ids=ids).logits[:, -1].float(), dim=-1)
            token = torch.multinomial(logp.exp(), 1, generator=gen)
            logps.append(logp.gather(-1, token))
            ids = torch.cat([ids, token], dim=1)
    logps = torch.cat(logps, dim=1)
    episodes = []
    for row, lp in zip(ids.tolist(), logps.tolist()):
        reward = sum(t in TARGETS[env] for t in row[3:]) / new_tokens
        episodes.append(Episode([Sample(row, [0, 0, 0] + [1] * new_tokens, [0.0] * 3 + lp)], reward))
    return Group(f"env{env}", episodes)


def groups_stream(policy: Policy, gen: torch.Generator, attempts: int = 8, sampler=rollout):
    env = 0
    while True:
        yield sampler(policy, env % len(TARGETS), attempts, gen)
        env += 1


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run faster on one intra-op thread (and far faster on a busy 2-core box)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_update_is_dppo_on_policy_and_matches_a_plain_adamw_step():
    policy = fresh_policy()
    gen = torch.Generator().manual_seed(0)
    groups = GroupBatcher(4).fill(groups_stream(policy, gen)).groups
    reference = copy.deepcopy(policy.model)
    cfg = config(micro_batch_tokens=64, deepspeed={"gradient_clipping": 0.0})  # several micro-batches
    trainer = DPPOTrainer(cfg, policy)
    stats = trainer.update(groups)
    # on-policy: pi == mu for every trained token, so the targets line up with mu exactly
    assert stats["ratio_min"] == pytest.approx(1.0, abs=1e-4) and stats["ratio_max"] == pytest.approx(1.0, abs=1e-4)
    assert stats["kl_rollout"] < 1e-7 and stats["masked_fraction"] == 0.0
    assert stats["micro_batches"] > 1 and stats["groups_kept"] == 4 and stats["step"] == 1

    # the same update by hand: the loss over the whole batch at once, one torch AdamW step
    optimizer = torch.optim.AdamW(reference.parameters(), lr=cfg.lr, weight_decay=0.0, eps=1e-8)
    mb = collate(advantage_samples(groups), pad_id=VOCAB - 2)
    logits = reference(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits[:, :-1]
    loss, _ = dppo_loss(token_logprobs(logits, mb.targets)[0], mb.rollout_logp, mb.advantages, mb.loss_mask)
    loss.backward()
    optimizer.step()
    assert stats["loss"] == pytest.approx(loss.item(), abs=1e-6)
    worst = max((a - b).abs().max().item() for a, b in zip(policy.model.parameters(), reference.parameters()))
    assert worst < 1e-5


def test_checkpoint_resumes_model_and_optimizer(tmp_path):
    gen = torch.Generator().manual_seed(1)
    a = fresh_policy(seed=3)
    first, second = [GroupBatcher(2).fill(groups_stream(a, gen)).groups for _ in range(2)]
    trainer = DPPOTrainer(config(), a)
    trainer.update(first)
    path = trainer.save(tmp_path / "ckpt")
    assert path.name == "step_1" and (tmp_path / "ckpt" / "latest").is_file()
    trainer.update(second)

    b = fresh_policy(seed=3)
    resumed = DPPOTrainer(config(), b)
    assert resumed.load(tmp_path / "ckpt") == 1
    resumed.update(second)  # Adam moments from step 1 shape step 2: equal only if they were restored
    for pa, pb in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(pa, pb)
    with pytest.raises(FileNotFoundError, match="no DeepSpeed checkpoint"):
        resumed.load(tmp_path / "nothing")


def test_only_the_newest_keep_checkpoints_are_kept(tmp_path):
    gen = torch.Generator().manual_seed(2)
    policy = fresh_policy(seed=4)
    trainer = DPPOTrainer(config(keep_checkpoints=2), policy)
    for _ in range(3):
        trainer.update(GroupBatcher(2).fill(groups_stream(policy, gen)).groups)
        trainer.save(tmp_path / "ckpt")
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir() if p.is_dir()) == ["step_2", "step_3"]
    assert (tmp_path / "ckpt" / "latest").read_text().strip() == "step_3"
    resumed = DPPOTrainer(config(keep_checkpoints=2), fresh_policy(seed=4))
    assert resumed.load(tmp_path / "ckpt") == 3 and resumed.load(tmp_path / "ckpt", "step_2") == 2
    trainer.close()
    resumed.close()


@pytest.mark.parametrize("stage", [1, 2])
def test_zero_stages_train_on_cpu_and_the_rollout_engine_sees_new_weights(stage):
    policy = fresh_policy(seed=5)
    gen = torch.Generator().manual_seed(2)
    groups = GroupBatcher(2).fill(groups_stream(policy, gen)).groups
    rollout_copy = copy.deepcopy(policy.model)
    probe = groups[0].episodes[0].samples[0]
    prompt = probe.input_ids[:probe.loss_mask.index(1)]
    before = policy.sequence_logprobs(prompt, probe.input_ids[len(prompt):])
    trainer = DPPOTrainer(config(lr=1e-2, deepspeed={"zero_stage": stage}), policy, CopyWeights(rollout_copy))
    stats = trainer.update(groups)
    assert torch.isfinite(torch.tensor(stats["loss"])) and stats["grad_norm"] > 0
    after = policy.sequence_logprobs(prompt, probe.input_ids[len(prompt):])
    assert not torch.allclose(before, after)  # the shared module generates with the new weights
    for name, param in policy.model.named_parameters():  # and the separate copy received them
        assert torch.equal(param, dict(rollout_copy.named_parameters())[name])


def test_a_tiny_model_learns_a_verifiable_task_with_dppo():
    torch.manual_seed(0)
    policy = fresh_policy(seed=7)
    gen = torch.Generator().manual_seed(7)
    cfg = config(lr=3e-3, deepspeed={"zero_stage": 1})
    trainer = DPPOTrainer(cfg, policy)
    batcher = GroupBatcher(cfg.envs_per_update)
    stream = groups_stream(policy, gen, attempts=cfg.attempts_per_env, sampler=batched_rollout)

    def mean_reward(n: int = 64) -> float:
        groups = [batched_rollout(policy, env, n, gen) for env in TARGETS]
        return sum(sum(g.rewards) for g in groups) / (n * len(groups))

    start = mean_reward()
    history = [trainer.update(batcher.fill(stream)) for _ in range(30)]
    end = mean_reward()
    assert start < 0.25
    assert end > start + 0.3, f"mean reward {start:.3f} -> {end:.3f}"
    assert all(h["ratio_mean"] == pytest.approx(1.0, abs=1e-3) for h in history)  # mu is what pi was
    assert history[-1]["reward_mean"] > history[0]["reward_mean"]


def test_multi_turn_chat_trajectories_train_on_the_engines_own_ids_and_logprobs(tmp_path):
    """TransformersChat -> ATIF files -> load_groups -> update: every generated token is trained
    once, against the log-prob the engine reported (on-policy ratio 1), whatever the packing."""
    from aes.agents.trajectory import TrajectoryRecorder, write_json_atomic
    from aes.config import ModelConfig
    from aes.models.hf_chat import TransformersChat
    from aes.models.tiny import build_tokenizer
    from aes.train import load_groups

    tokenizer = build_tokenizer()
    model = build_model("tiny-qwen2", len(tokenizer), seed=11, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id)
    policy = Policy(model=model, tokenizer=tokenizer)
    chat = TransformersChat(ModelConfig(name="tiny", backend="tiny", model="tiny-qwen2", max_tokens=6, seed=0),
                            policy=policy)
    generated = 0
    for attempt, reward in enumerate([1.0, 0.0, 0.5]):
        recorder = TrajectoryRecorder("test", "tiny")
        messages = [{"role": "user", "content": "list the files"}]
        for _ in range(3):
            result = chat.chat(messages)
            recorder.add_agent_step(result, None)
            generated += len(result.completion_token_ids)
            messages += [{"role": "assistant", "content": result.text},
                         {"role": "user", "content": "[exit code 0]\nREADME.md"}]
        write_json_atomic(tmp_path / "trajectories" / "env" / "tiny" / f"{attempt}.json",
                          recorder.finish(reward=reward))
    groups = list(load_groups(tmp_path / "trajectories", max_seq_len=512))
    stats = DPPOTrainer(config(max_seq_len=512, micro_batch_tokens=1024), policy).update(groups)
    assert stats["loss_tokens"] == generated and stats["truncated_tokens"] == 0
    assert 3 <= stats["sequences"] <= 9  # packed per episode (3) .. one per model call (9)
    assert stats["ratio_mean"] == pytest.approx(1.0, abs=1e-4) and stats["kl_rollout"] < 1e-6
    assert policy.version == 1


@pytest.mark.slow
def test_smollm2_one_dppo_update_from_real_generations_then_generation_with_new_weights():
    from aes.config import ModelConfig
    from aes.models.hf_chat import TransformersChat, load_gguf_policy

    torch.set_num_threads(os.cpu_count() or 1)
    policy = load_gguf_policy("smollm2-135m-instruct")
    chat = TransformersChat(ModelConfig(name="smollm2", backend="transformers", model="smollm2-135m-instruct",
                                        max_tokens=24, seed=0), policy=policy)
    messages = [{"role": "user", "content": "What is 2 + 2? Answer with one number."}]
    results = [chat.chat(messages) for _ in range(4)]
    # verifiable: says 4, shorter is better (continuous, so the group has spread)
    rewards = [float("4" in r.text) - 0.01 * len(r.completion_token_ids) for r in results]
    episodes = [Episode([Sample(r.prompt_token_ids + r.completion_token_ids,
                                [0] * len(r.prompt_token_ids) + [1] * len(r.completion_token_ids),
                                [0.0] * len(r.prompt_token_ids) + r.completion_logprobs)], reward)
                for r, reward in zip(results, rewards)]
    probe = results[0]
    before = policy.sequence_logprobs(probe.prompt_token_ids, probe.completion_token_ids)
    cfg = TrainerConfig(lr=1e-5, envs_per_update=1, attempts_per_env=4, max_seq_len=512, temperature=1.0,
                        micro_batch_tokens=2048, deepspeed=DeepSpeedConfig(zero_stage=1))
    stats = DPPOTrainer(cfg, policy).update([Group("two-plus-two", episodes)])
    assert stats["ratio_mean"] == pytest.approx(1.0, abs=1e-3) and stats["masked_fraction"] == 0.0
    after = policy.sequence_logprobs(probe.prompt_token_ids, probe.completion_token_ids)
    assert not torch.allclose(before, after) and policy.version == 1
    again = chat.chat(messages)  # the rollout engine now samples from the updated weights
    assert again.completion_token_ids and len(again.completion_logprobs) == len(again.completion_token_ids)


def _needs_vllm(gpus: int = 1):
    if not torch.cuda.is_available() or torch.cuda.device_count() < gpus:
        pytest.skip(f"needs {gpus} CUDA GPU(s)")
    return pytest.importorskip("vllm")


def _save_tiny(path):
    from aes.models.tiny import build_tokenizer

    tokenizer = build_tokenizer()
    model = build_model("tiny-qwen2", len(tokenizer), seed=13, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return model, tokenizer


def _vllm_group(outputs, prompt_ids) -> Group:
    episodes = []
    for out in outputs[0].outputs:
        ids = list(out.token_ids)
        lps = [step[t].logprob for step, t in zip(out.logprobs, ids)]
        reward = sum(t < 100 for t in ids) / len(ids)
        episodes.append(Episode([Sample(prompt_ids + ids, [0] * len(prompt_ids) + [1] * len(ids),
                                        [0.0] * len(prompt_ids) + lps)], reward))
    return Group("vllm", episodes)


class RecordedVLLMClient:
    """The client side of vLLM's weight-transfer protocol as TRL's ``VLLMClient`` speaks it (the
    calls :class:`aes.train.sync.VLLMServer` makes, in order), recorded; the NCCL broadcast itself
    needs two GPUs (``test_vllm_server_takes_new_weights_without_a_restart``). ``during`` runs while
    the tensors stream, as the server's workers would be receiving them."""

    def __init__(self, during=None):
        self.calls: list[tuple] = []
        self.during = during

    def update_named_params(self, metadata, named_params):
        tensors = [(name, tuple(t.shape)) for name, t in named_params]  # the stream is consumed, as NCCL does
        if self.during is not None:
            self.during()
        self.calls.append(("update_named_params", [m[0] for m in metadata], tensors))

    def reset_prefix_cache(self):
        self.calls.append(("reset_prefix_cache",))

    def close_communicator(self):
        self.calls.append(("close_communicator",))


@pytest.mark.parametrize("servers", [1, 2])
def test_a_vllm_push_holds_the_rollout_calls_and_counts_the_update(servers, monkeypatch):
    """weight_sync=vllm_server after a real DeepSpeed update: the solver's model calls wait while the
    weights stream to every server (a call started then is served by the new weights), and the chat
    client counts one update, so the calls after it record policy version 1 (carried rollouts end
    at flywheel.carry_max_updates by it)."""
    import threading
    import time

    from aes.models.openai_client import OpenAIChat
    from aes.train import build_weight_sync
    from tests.test_model_clients import ReplayServer, qwen

    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    server = ReplayServer()
    server.thread.start()
    try:
        # 3 model calls, and each server told its new policy version (POST /update_weight_version)
        server.push(*["vllm_logprobs_token_ids"] * (3 + servers))
        solver = qwen(server)
        if servers > 1:  # several servers: the same endpoint twice is enough for the client side
            from dataclasses import replace

            solver = replace(solver, base_urls=[solver.base_url] * servers)
        chat = OpenAIChat(solver)
        messages = [{"role": "user", "content": "What is 6 times 7?"}]
        assert chat.chat(messages).policy_version == 0
        sync = build_weight_sync(config(), solver, rollout=chat, mode="vllm_server")
        held: dict = {}

        def call_during_push():
            thread = threading.Thread(target=lambda: held.setdefault("result", chat.chat(messages)))
            thread.start()
            time.sleep(0.3)
            held.setdefault("answered_during_push", "result" in held)
            held["thread"] = thread

        clients = [RecordedVLLMClient(during=call_during_push if i == 0 else None) for i in range(servers)]
        for target, client in zip(getattr(sync, "servers", [sync]), clients):
            target.client = client
        policy = fresh_policy(seed=4)
        trainer = DPPOTrainer(config(), policy, sync)
        trainer.update(GroupBatcher(1).fill(groups_stream(policy, torch.Generator().manual_seed(3))).groups)
        held["thread"].join(timeout=10)
        assert held["answered_during_push"] is False  # held until every server had the new weights
        assert held["result"].policy_version == 1 and chat.weights_version == 1
        assert chat.chat(messages).policy_version == 1
        names = [n for n, _ in policy.model.named_parameters()]
        for client in clients:  # every server: all parameters, then its prefix cache dropped
            assert [c[0] for c in client.calls] == ["update_named_params", "reset_prefix_cache"]
            assert client.calls[0][1] == names and [n for n, _ in client.calls[0][2]] == names
        sync.close()
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


@pytest.mark.gpu
def test_vllm_colocated_generates_with_the_trained_weights(tmp_path):
    vllm = _needs_vllm()
    from aes.train import VLLMColocated
    from aes.train.engine import ensure_distributed

    model, tokenizer = _save_tiny(tmp_path / "m")
    ensure_distributed()  # vLLM's external launcher joins the trainer's process group
    llm = vllm.LLM(model=str(tmp_path / "m"), dtype="bfloat16", gpu_memory_utilization=0.2, enforce_eager=True,
                   distributed_executor_backend="external_launcher", logprobs_mode="processed_logprobs")
    prompt = tokenizer("<|im_start|>user\nls<|im_end|>\n<|im_start|>assistant\n")["input_ids"]
    params = vllm.SamplingParams(n=8, temperature=1.0, max_tokens=8, logprobs=0, seed=0)
    group = _vllm_group(llm.generate([{"prompt_token_ids": prompt}], params), prompt)
    trainer = DPPOTrainer(config(lr=1e-2), model, VLLMColocated(llm))
    stats = trainer.update([group])
    assert stats["ratio_mean"] == pytest.approx(1.0, abs=0.05)  # mu from vLLM ~ pi of the trainer (bf16)
    probe = group.episodes[0].samples[0].input_ids
    scored = llm.generate([{"prompt_token_ids": probe}],
                          vllm.SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0))
    vllm_lp = torch.tensor([d[t].logprob for d, t in zip(scored[0].prompt_logprobs[1:], probe[1:])])
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([probe], device=trainer.device)).logits[0, :-1].float()
    ours = torch.log_softmax(logits, -1).gather(-1, torch.tensor(probe[1:], device=logits.device)[:, None])
    assert torch.allclose(vllm_lp, ours[:, 0].cpu(), atol=0.05)


@pytest.mark.gpu
def test_vllm_server_takes_new_weights_without_a_restart(tmp_path):
    _needs_vllm(gpus=2)  # NCCL needs the trainer and the server on different GPUs
    import subprocess
    import time
    import urllib.request

    from aes.train import VLLMServer

    model, _tokenizer = _save_tiny(tmp_path / "m")
    env = dict(os.environ, VLLM_SERVER_DEV_MODE="1", CUDA_VISIBLE_DEVICES="1")
    server = subprocess.Popen(["vllm", "serve", str(tmp_path / "m"), "--port", "8011", "--enforce-eager",
                               "--gpu-memory-utilization", "0.2", "--weight-transfer-config", '{"backend": "nccl"}'],
                              env=env)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen("http://127.0.0.1:8011/health", timeout=1)
                break
            except OSError:
                time.sleep(1)
        sync = VLLMServer("http://127.0.0.1:8011/v1")
        trainer = DPPOTrainer(config(lr=1e-2), model.cuda(), sync)
        sync.push(trainer.engine)  # the full weights over NCCL into the running server
        assert sync.version == 1 and server.poll() is None
        sync.close()
    finally:
        server.terminate()
        server.wait(timeout=60)


@pytest.mark.slow
def test_llama_cpp_serves_the_trained_weights_after_a_gguf_export(tmp_path):
    """The CPU rollout engine for SmolLM2: llama.cpp reloads an F32 GGUF written after each update;
    the log-probs it reports then match the trainer's pi of the *updated* weights."""
    from aes.config import ModelConfig
    from aes.models.hf_chat import load_gguf_policy
    from aes.models.local import LocalChat
    from aes.train import build_weight_sync

    torch.set_num_threads(os.cpu_count() or 1)
    solver = ModelConfig(name="local", backend="local", model="smollm2-135m-instruct", max_tokens=16, seed=0,
                         parallel=1)
    policy = load_gguf_policy(solver.model)
    chat = LocalChat(solver)
    cfg = TrainerConfig(lr=1e-4, envs_per_update=1, attempts_per_env=4, max_seq_len=512, micro_batch_tokens=2048,
                        temperature=1.0)
    trainer = DPPOTrainer(cfg, policy, build_weight_sync(cfg, solver, rollout=chat, out_dir=tmp_path))
    trainer.push_weights()  # from now on the engine serves the F32 weights the trainer holds
    messages = [{"role": "user", "content": "Name a shell command that lists files."}]
    results = [chat.chat(messages) for _ in range(4)]
    episodes = [Episode([Sample(r.prompt_token_ids + r.completion_token_ids,
                                [0] * len(r.prompt_token_ids) + [1] * len(r.completion_token_ids),
                                [0.0] * len(r.prompt_token_ids) + r.completion_logprobs)],
                        float("ls" in r.text) + len(set(r.completion_token_ids)) / 16) for r in results]
    stats = trainer.update([Group("ls", episodes)])
    assert stats["kl_rollout"] < 1e-3 and stats["masked_fraction"] == 0.0  # mu (llama.cpp) ~ pi (torch)
    after = chat.chat(messages)
    pi_new = policy.sequence_logprobs(after.prompt_token_ids, after.completion_token_ids)
    assert (pi_new - torch.tensor(after.completion_logprobs)).abs().mean() < 0.01
    assert [p.name for p in tmp_path.glob("policy-v*.gguf")] == ["policy-v2.gguf"]  # the older export is gone
    assert (trainer.export(tmp_path / "hf") / "model.safetensors").is_file()  # e.g. for a vLLM server
    trainer.close()
    assert list(tmp_path.glob("*.gguf")) == []  # the engine's copy of the weights leaves no export behind
    chat.close()


def test_a_batch_without_signal_still_steps_with_zero_gradients():
    policy = fresh_policy(seed=9)
    flat = Group("flat", [Episode([Sample([20, 24, 25, 1, 2], [0, 0, 0, 1, 1], [0.0, 0.0, 0.0, -3.0, -3.0])], 0.5)
                          for _ in range(2)])
    before = [p.detach().clone() for p in policy.model.parameters()]
    stats = DPPOTrainer(config(), policy).update([flat])
    assert stats["skipped_sequences"] == 2 and stats["loss"] == 0.0 and stats["step"] == 1
    assert all(torch.equal(a, b) for a, b in zip(before, policy.model.parameters()))  # AdamW, no decay


def test_zero3_shards_the_weights_and_the_rollout_copy_receives_them_whole(tmp_path):
    from transformers import AutoModelForCausalLM

    from aes.config import ConfigError
    from aes.train import SharedModule
    from aes.train.sync import full_parameters

    policy = fresh_policy(seed=5)
    start = copy.deepcopy(policy.model)
    rollout_copy = copy.deepcopy(policy.model)
    groups = GroupBatcher(2).fill(groups_stream(policy, torch.Generator().manual_seed(2))).groups
    trainer = DPPOTrainer(config(lr=1e-2, deepspeed={"zero_stage": 3}), policy.model, CopyWeights(rollout_copy))
    trainer.update(groups)
    full = {name: t.clone() for name, t in full_parameters(trainer.engine)}
    for name, param in rollout_copy.named_parameters():
        assert torch.equal(param, full[name]) and not torch.equal(param, dict(start.named_parameters())[name])
    with pytest.raises(ConfigError, match="weight_sync=copy"):
        SharedModule().push(trainer.engine)
    exported = AutoModelForCausalLM.from_pretrained(trainer.export(tmp_path / "hf"))
    for name, param in exported.named_parameters():
        assert torch.equal(param, full[name])
