"""Carried rollouts, proven on one attempt: it starts under policy v0, a real DPPO update lands between
two of its model calls, and it goes on under v1. The spanning case is asserted first; then the
attempt's training episode keeps, for the tokens sampled before the update, the log-probs they were
sampled with (mu of v0), which the updated policy no longer gives them."""

from __future__ import annotations

import pytest
import torch

from aes.agents import TerminalAgent
from aes.config import AgentConfig, ModelConfig, TrainerConfig
from aes.models.hf_chat import Policy, TransformersChat
from aes.models.tiny import build_model, build_tokenizer
from aes.sandbox import TrialRunner
from aes.tasks import load_task
from aes.train import DPPOTrainer, SharedModule
from aes.train.episodes import Episode, Group, Sample, episode_from_trajectory
from tests.conftest import make_task


class UpdatedAfterFirstCall(TransformersChat):
    """The tiny policy in process; a DPPO update (the trainer's, on this very module) lands right after
    the attempt's first model call, as it does for an attempt carried across an update."""

    trainer: DPPOTrainer

    def _chat_once(self, messages, tools, max_tokens, temperature):
        result = super()._chat_once(messages, tools, max_tokens, temperature)
        if self.weights_version == 0 and not getattr(self, "updated", False):
            self.updated = True
            ids = result.prompt_token_ids + result.completion_token_ids
            mask = [0] * len(result.prompt_token_ids) + [1] * len(result.completion_token_ids)
            mu = [0.0] * len(result.prompt_token_ids) + list(result.completion_logprobs)
            self.trainer.update([Group("env", [Episode([Sample(ids, mask, mu)], 1.0),
                                               Episode([Sample(ids, mask, mu)], 0.0)])])
        return result


@pytest.mark.docker
def test_an_attempt_spanning_an_update_keeps_the_logprobs_its_early_tokens_were_sampled_with(sandbox, cfg, tmp_path):
    tokenizer = build_tokenizer()
    model = build_model("tiny-qwen2", len(tokenizer), seed=5, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id)
    policy = Policy(model=model, tokenizer=tokenizer, name="tiny@5")
    chat = UpdatedAfterFirstCall(ModelConfig(name="tiny", backend="tiny", model="tiny-qwen2", max_tokens=24,
                                             context_length=2048, seed=0, logprobs=True), policy=policy)
    chat.trainer = DPPOTrainer(TrainerConfig(lr=5e-2, envs_per_update=1, attempts_per_env=2, max_seq_len=2048,
                                             micro_batch_tokens=4096, temperature=1.0), policy, SharedModule(policy))
    agent = TerminalAgent(chat, AgentConfig(max_turns=3, max_format_errors=5), max_policy_span=2)
    result = TrialRunner(cfg.sandbox, sandbox).run(load_task(make_task(tmp_path)), agent)
    trajectory = result.agent_info["trajectory"]
    steps = [s for s in trajectory["steps"] if s["source"] == "agent"]
    versions = [s["extra"]["policy_version"] for s in steps]
    assert len(steps) == 3 and versions == [0, 1, 1], versions  # the attempt spans the update

    first = steps[0]["metrics"]
    prompt, completion, sampled = first["prompt_token_ids"], first["completion_token_ids"], first["logprobs"]
    now = policy.sequence_logprobs(prompt, completion).tolist()
    drift = max(abs(a - b) for a, b in zip(sampled, now))
    assert drift > 1e-3  # the updated policy gives those tokens other log-probs than they were sampled with

    episode = episode_from_trajectory(trajectory, 2048, "attempt", reward=1.0)
    mu = [lp for s in episode.samples for lp, m in zip(s.rollout_logprobs, s.loss_mask) if m]
    assert mu[:len(sampled)] == pytest.approx(sampled, abs=0)  # v0's mu for the tokens sampled under v0
    later = [lp for s in steps[1:] for lp in s["metrics"]["logprobs"]]
    assert mu[len(sampled):] == pytest.approx(later, abs=0)  # and v1's for the rest
    print(f"\n[carried] versions {versions}; the first turn's {len(sampled)} tokens keep mu of v0 "
          f"(the updated policy differs by up to {drift:.3f} nats)")
    chat.trainer.close()
