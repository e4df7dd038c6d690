"""DPPO loss against hand-computed cases; advantages, dynamic batch filling, proposer reward;
training sequences from trajectories (multi-turn packing, truncation); micro-batches."""

from __future__ import annotations

import math

import pytest
import torch

from aes.config import ConfigError, TrainerConfig
from aes.train import (
    ADMITTED,
    BROKEN,
    VALID,
    Episode,
    Group,
    GroupBatcher,
    Sample,
    TrajectoryError,
    Turn,
    admission_outcome,
    advantage_samples,
    dppo_loss,
    episode_from_trajectory,
    group_advantages,
    has_spread,
    load_groups,
    pack_turns,
    proposer_reward,
    token_logprobs,
)
from aes.train.batching import collate, pack, shard
from aes.train.dppo import merge_stats

D = torch.float64


def t(*rows):
    return torch.tensor(rows, dtype=D)


def logs(*probs):
    return torch.tensor([probs], dtype=D).log()


# --- the loss -----------------------------------------------------------------------------


def test_loss_matches_hand_computation():
    # mu = 0.5 everywhere; pi = 0.55 (in region), 0.7 (pi - mu = 0.2 > 0.1: out for A > 0)
    logp = logs(0.55, 0.7, 0.3, 0.45).requires_grad_()
    rollout = logs(0.5, 0.5, 0.5, 0.5)
    adv = t([1.0, 1.0, -2.0, -2.0])
    mask = t([1.0, 1.0, 1.0, 1.0])
    loss, stats = dppo_loss(logp, rollout, adv, mask)
    # token 2: mu - pi = 0.2 > 0.1 with A < 0 -> out; tokens 0 and 3 stay in
    expected = -(0.55 / 0.5 * 1.0 + 0.45 / 0.5 * -2.0) / 4
    assert loss.item() == pytest.approx(expected, abs=1e-12)
    assert stats["masked_fraction"] == 0.5
    assert stats["masked_pos_fraction"] == 0.5 and stats["masked_neg_fraction"] == 0.5
    assert stats["ratio_max"] == pytest.approx(1.4) and stats["ratio_min"] == pytest.approx(0.6)
    assert stats["ratio_mean"] == pytest.approx((1.1 + 1.4 + 0.6 + 0.9) / 4)
    assert stats["tv_mean"] == pytest.approx((0.05 + 0.2 + 0.2 + 0.05) / 4)


def test_gradient_flows_through_the_ratio_only_and_is_zero_outside_the_region():
    logp = logs(0.55, 0.7, 0.3, 0.45).requires_grad_()
    rollout = logs(0.5, 0.5, 0.5, 0.5).requires_grad_()
    adv = t([1.0, 1.0, -2.0, -2.0]).requires_grad_()
    loss, _ = dppo_loss(logp, rollout, adv, t([1.0, 1.0, 1.0, 1.0]))
    loss.backward()
    # d/dlogp of -M r A / N = -M r A / N (dr/dlogp = r); M is a constant
    ratio = torch.tensor([1.1, 1.4, 0.6, 0.9], dtype=D)
    trust = torch.tensor([1.0, 0.0, 0.0, 1.0], dtype=D)
    expected = -trust * ratio * torch.tensor([1.0, 1.0, -2.0, -2.0], dtype=D) / 4
    assert torch.allclose(logp.grad[0], expected, atol=1e-12)
    assert logp.grad[0, 1] == 0 and logp.grad[0, 2] == 0
    assert rollout.grad is None and adv.grad is None  # mu and A are data


def test_trust_mask_edges_are_kept_exactly_at_delta():
    logp, rollout = logs(0.75, 0.25), logs(0.5, 0.5)
    diff = (logp.exp() - rollout.exp())[0]  # the difference exactly as the loss computes it
    high, low = diff[0].item(), -diff[1].item()
    at_edge = dppo_loss(logp, rollout, t([1.0, -1.0]), t([1.0, 1.0]), delta_low=low, delta_high=high)[1]
    assert at_edge["masked_fraction"] == 0.0
    below = lambda x: torch.nextafter(torch.tensor(x, dtype=D), torch.tensor(-1.0, dtype=D)).item()
    over = dppo_loss(logp, rollout, t([1.0, -1.0]), t([1.0, 1.0]),
                     delta_low=below(low), delta_high=below(high))[1]
    assert over["masked_fraction"] == 1.0


def test_direction_matters_a_rising_token_with_negative_advantage_is_kept():
    # pi far above mu, but A < 0 pushes it down again: inside the region; and vice versa
    loss, stats = dppo_loss(logs(0.9, 0.1), logs(0.5, 0.5), t([-1.0, 1.0]), t([1.0, 1.0]))
    assert stats["masked_fraction"] == 0.0
    assert loss.item() == pytest.approx(-(1.8 * -1 + 0.2 * 1) / 2)


def test_zero_advantages_give_zero_loss_and_gradient():
    logp = logs(0.9, 0.1, 0.5).requires_grad_()
    loss, stats = dppo_loss(logp, logs(0.1, 0.9, 0.5), t([0.0, 0.0, 0.0]), t([1.0, 1.0, 1.0]))
    loss.backward()
    assert loss.item() == 0.0 and stats["masked_fraction"] == 0.0
    assert torch.count_nonzero(logp.grad) == 0


def test_masked_tokens_neither_count_nor_receive_gradient():
    logp = logs(0.55, 0.99, 0.45).requires_grad_()
    mask = torch.tensor([[True, False, True]])
    loss, stats = dppo_loss(logp, logs(0.5, 0.01, 0.5), t([1.0, 1.0, 1.0]), mask)
    loss.backward()
    assert loss.item() == pytest.approx(-(1.1 + 0.9) / 2)
    assert logp.grad[0, 1] == 0 and stats["tokens"] == 2 and stats["ratio_max"] == pytest.approx(1.1)


def test_sequence_advantages_broadcast_and_token_mean_spans_the_batch():
    logp = torch.zeros(2, 3, dtype=D)
    mask = t([1.0, 1.0, 1.0], [1.0, 0.0, 0.0])
    per_seq = dppo_loss(logp, logp, torch.tensor([1.0, -1.0], dtype=D), mask)[0]
    per_tok = dppo_loss(logp, logp, t([1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]), mask)[0]
    assert per_seq.item() == per_tok.item() == pytest.approx(-(3 - 1) / 4)
    seq_mean = dppo_loss(logp, logp, torch.tensor([1.0, -1.0], dtype=D), mask, aggregation="seq_mean")[0]
    assert seq_mean.item() == pytest.approx(-(1 - 1) / 2)


def test_micro_batches_with_a_shared_normalizer_add_up_to_the_full_batch():
    torch.manual_seed(0)
    logp, rollout = torch.randn(4, 5, dtype=D) - 1, torch.randn(4, 5, dtype=D) - 1
    adv, mask = torch.randn(4, dtype=D), (torch.rand(4, 5) > 0.3).to(D)
    full, full_stats = dppo_loss(logp, rollout, adv, mask)
    parts = [dppo_loss(logp[i:i + 2], rollout[i:i + 2], adv[i:i + 2], mask[i:i + 2], normalizer=mask.sum())
             for i in (0, 2)]
    assert (parts[0][0] + parts[1][0]).item() == pytest.approx(full.item(), abs=1e-12)
    merged = merge_stats([s for _, s in parts])
    for key in ("masked_fraction", "ratio_mean", "ratio_min", "ratio_max", "tv_mean", "loss"):
        assert merged[key] == pytest.approx(full_stats[key], abs=1e-12)


def test_bad_shapes_and_modes_fail_clearly():
    with pytest.raises(ValueError, match="same"):
        dppo_loss(torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(2), torch.ones(2, 3))
    with pytest.raises(ValueError, match="aggregation"):
        dppo_loss(torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1), torch.ones(1, 1), aggregation="sum")


def test_token_logprobs_match_log_softmax_at_temperature():
    torch.manual_seed(0)
    logits, targets = torch.randn(2, 4, 7), torch.randint(0, 7, (2, 4))
    logp, ent = token_logprobs(logits, targets, temperature=0.7, with_entropy=True)
    ref = torch.log_softmax(logits / 0.7, -1)
    assert torch.allclose(logp, ref.gather(-1, targets[..., None]).squeeze(-1), atol=1e-6)
    assert torch.allclose(ent, -(ref.exp() * ref).sum(-1), atol=1e-5)


# --- advantages, batch filling, proposer reward --------------------------------------------


def group(key, rewards, role="solver"):
    episodes = [Episode([Sample([1, 2, 3], [0, 1, 1], [0.0, -1.0, -1.0])], r) for r in rewards]
    return Group(key, episodes, role)


def test_group_advantages_centre_without_std_division():
    assert group_advantages([1.0, 0.0, 0.0, 1.0]) == [0.5, -0.5, -0.5, 0.5]
    assert group_advantages([0.2, 0.4]) == pytest.approx([-0.1, 0.1])
    assert group_advantages([]) == []
    assert not has_spread([0.5, 0.5, 0.5]) and has_spread([0.5, 0.75]) and not has_spread([1.0])


def test_batcher_drops_flat_groups_and_collects_until_full():
    stream = iter([group("a", [0, 0]), group("b", [0, 1]), group("c", [1, 1]), group("d", [0.25, 0.5]),
                   group("e", [0, 1])])
    batcher = GroupBatcher(2)
    batch = batcher.fill(stream)
    assert [g.key for g in batch.groups] == ["b", "d"] and batch.full
    assert (batch.kept, batch.collected) == (2, 4)
    stats = batch.stats()
    assert stats["groups_kept_fraction"] == 0.5 and stats["reward_mean"] == pytest.approx(0.4375)
    rest = batcher.fill(stream)  # the iterator keeps what was not read
    assert [g.key for g in rest.groups] == ["e"] and not rest.full and rest.collected == 1
    assert (batcher.kept_total, batcher.collected_total) == (3, 5)


def test_proposer_groups_keep_their_own_baseline():
    solver, proposer = group("env", [1.0, 0.0]), group("assignment", [1.0, 0.5, 0.0, 0.5], role="proposer")
    samples = advantage_samples([solver, proposer])
    assert [s.advantage for s in samples] == [0.5, -0.5, 0.5, 0.0, -0.5, 0.0]
    stats = GroupBatcher(2).fill([solver, proposer]).stats()
    assert stats["solver/reward_mean"] == 0.5 and stats["proposer/reward_mean"] == 0.5


def test_proposer_reward_separates_broken_valid_and_admitted():
    partial = TrainerConfig().proposer_partial_reward
    assert proposer_reward(BROKEN, partial) == 0.0
    assert proposer_reward(VALID, partial) == partial == 0.5
    assert proposer_reward(ADMITTED, 0.3) == 1.0
    assert admission_outcome(valid=False, admitted=False) == BROKEN
    assert admission_outcome(valid=True, admitted=False) == VALID
    assert admission_outcome(valid=True, admitted=True) == ADMITTED
    with pytest.raises(ValueError, match="unknown admission outcome"):
        proposer_reward("rejected", partial)


def test_trainer_config_checks_say_what_to_set():
    with pytest.raises(ConfigError, match="micro_batch_tokens"):
        TrainerConfig(max_seq_len=4096, micro_batch_tokens=1024)
    with pytest.raises(ConfigError, match="attempts_per_env >= 2"):
        TrainerConfig(attempts_per_env=1)
    with pytest.raises(ConfigError, match="kl_coef"):
        TrainerConfig(kl_coef=0.1)
    with pytest.raises(ConfigError, match="proposer_partial_reward"):
        TrainerConfig(proposer_partial_reward=2.0)


# --- sequences from trajectories -----------------------------------------------------------


def test_prefix_consistent_turns_pack_into_one_sequence():
    turns = [Turn([1, 2], [3, 4], [-0.1, -0.2]), Turn([1, 2, 3, 4, 9, 9], [5], [-0.3])]
    [sample], cut = pack_turns(turns, max_seq_len=100)
    assert sample.input_ids == [1, 2, 3, 4, 9, 9, 5]
    assert sample.loss_mask == [0, 0, 1, 1, 0, 0, 1]  # tool output / template tokens masked
    assert sample.rollout_logprobs == [0, 0, -0.1, -0.2, 0, 0, -0.3] and cut == 0


def test_a_re_rendered_history_starts_a_new_sequence():
    turns = [Turn([1, 2], [3, 4], [-0.1, -0.2]), Turn([1, 2, 7, 9], [5], [-0.3])]  # history re-rendered
    samples, _ = pack_turns(turns, max_seq_len=100)
    assert [s.input_ids for s in samples] == [[1, 2, 3, 4], [1, 2, 7, 9, 5]]
    assert [s.loss_mask for s in samples] == [[0, 0, 1, 1], [0, 0, 0, 0, 1]]


def test_truncation_keeps_the_head_and_never_extends_past_the_limit():
    turns = [Turn([1, 2], [3, 4], [-0.1, -0.2]), Turn([1, 2, 3, 4, 8], [5, 6], [-0.3, -0.4])]
    samples, cut = pack_turns(turns, max_seq_len=6)
    # turn 2 would make 7 tokens: it starts anew from its own prompt and keeps its first 6
    assert [s.input_ids for s in samples] == [[1, 2, 3, 4], [1, 2, 3, 4, 8, 5]] and cut == 1
    assert samples[1].loss_mask == [0, 0, 0, 0, 0, 1]
    # a call whose prompt fills the limit contributes nothing
    assert pack_turns([Turn([1, 2, 3], [4], [-1.0])], max_seq_len=3) == ([], 1)


def atif(turns, reward=1.0):
    steps = [{"step_id": 1, "source": "system", "message": "sys"}]
    for i, (p, c, lp) in enumerate(turns):
        steps.append({"step_id": i + 2, "source": "agent", "message": "x",
                      "metrics": {"prompt_token_ids": p, "completion_token_ids": c, "logprobs": lp}})
    return {"schema_version": "ATIF-v1.8", "steps": steps, "extra": {"reward": reward}}


def test_trajectory_files_become_groups(tmp_path):
    import json

    root = tmp_path / "trajectories"
    for env, rewards in {"env-a": [1.0, 0.0, None], "env-b": [0.5]}.items():
        for i, r in enumerate(rewards):
            path = root / env / "tiny" / f"{i}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(atif([([1, 2], [3], [-0.5])], reward=r)))
    (root / "index.jsonl").write_text("")
    groups = list(load_groups(root, max_seq_len=64))
    assert [g.key for g in groups] == ["env-a/tiny", "env-b/tiny"]
    assert groups[0].rewards == [1.0, 0.0]  # no reward (verifier error) is left out, not a 0
    assert groups[0].meta == {"env_id": "env-a", "solver": "tiny"}


def test_trajectories_without_token_ids_are_refused_with_the_fix():
    with pytest.raises(TrajectoryError, match="solver.logprobs=true"):
        episode_from_trajectory(atif([([1], None, None)]), 64, "t.json")
    with pytest.raises(TrajectoryError, match="2 log-probs for 1"):
        episode_from_trajectory(atif([([1], [2], [-1.0, -1.0])]), 64)
    assert episode_from_trajectory(atif([([1], [2], [-1.0])], reward=None), 64) is None


# --- micro-batches -------------------------------------------------------------------------


def seq(n, adv=1.0):
    return Sample(list(range(1, n + 1)), [0] + [1] * (n - 1), [0.0] + [-1.0] * (n - 1), adv)


def test_packing_respects_the_token_budget_and_shards_evenly():
    samples = [seq(n) for n in (3, 10, 4, 9, 2)]
    groups = pack(samples, token_budget=20)
    assert all(len(g) * max(len(s) for s in g) <= 20 for g in groups)
    assert sorted(len(s) for g in groups for s in g) == [2, 3, 4, 9, 10]
    ranks = [shard(groups, r, 2) for r in range(2)]
    assert len(ranks[0]) == len(ranks[1]) == math.ceil(len(groups) / 2)
    assert shard([], 0, 1) == [[]]  # a step always has a (possibly empty) micro-batch


def test_collate_aligns_targets_with_their_logits():
    mb = collate([seq(4, 0.5), seq(2, -1.0)], pad_id=0)
    assert mb.input_ids.tolist() == [[1, 2, 3, 4], [1, 2, 0, 0]]
    assert mb.targets.tolist() == [[2, 3, 4], [2, 0, 0]]
    assert mb.loss_mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert mb.rollout_logp.tolist() == [[-1, -1, -1], [-1, 0, 0]]
    assert mb.advantages.tolist() == [0.5, -1.0] and mb.loss_tokens == 4
    assert collate([]).loss_tokens == 0
