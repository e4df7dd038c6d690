"""The DPPO loss (paper §3.3; Qi et al. 2026, "Rethinking the Trust Region in LLM RL").

Per token t, with the behaviour (rollout) probability mu_t = exp(rollout_logp), the current
probability pi_t = exp(logp), the ratio r_t = exp(logp - rollout_logp) and advantage A_t:

    M_t  = 0 if (A_t > 0 and pi_t - mu_t > delta_high) or (A_t < 0 and mu_t - pi_t > delta_low) else 1
    loss = - sum_t M_t * r_t * A_t * m_t / sum_t m_t

``m_t`` is 1 on policy-generated tokens only. The trust mask M is a constant (no gradient),
so the gradient flows through r_t alone and is exactly zero for tokens outside the trust
region. Unlike PPO's ratio clip, the region is a bound on the probability difference (a
total-variation proxy), which does not over-constrain rare tokens or under-constrain
frequent ones. Edges are kept: a token with pi - mu exactly delta_high is still trained.
"""

from __future__ import annotations

import torch

AGGREGATIONS = ("token_mean", "seq_mean")
EMPTY_STATS = {"masked_fraction": 0.0, "masked_pos_fraction": 0.0, "masked_neg_fraction": 0.0,
               "ratio_mean": 1.0, "ratio_min": 1.0, "ratio_max": 1.0, "tv_mean": 0.0, "kl_rollout": 0.0}
"""Stats of a call without loss tokens (every token trivially inside the trust region)."""


def dppo_loss(
    logp: torch.Tensor,
    rollout_logp: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    delta_low: float = 0.1,
    delta_high: float = 0.1,
    *,
    aggregation: str = "token_mean",
    normalizer: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The DPPO loss and its statistics.

    Args:
        logp: [batch, tokens] log-probs of the taken tokens under the current policy.
        rollout_logp: [batch, tokens] log-probs the rollout engine reported (mu); no gradient.
        advantages: [batch] per sequence or [batch, tokens] per token; no gradient.
        loss_mask: [batch, tokens], float or bool; 1 on policy-generated tokens.
        delta_low, delta_high: trust-region bounds for negative / positive advantages.
        aggregation: ``token_mean`` (default; sum over every loss token / their count) or
            ``seq_mean`` (each sequence's token mean, averaged over sequences).
        normalizer: the denominator when this call sees one micro-batch of a larger batch
            (that batch's loss-token count for token_mean, its sequence count for seq_mean);
            None uses this batch's own.

    Returns:
        ``(loss, stats)``; stats are floats over the loss tokens of this call: ``tokens``,
        ``masked_fraction`` (share outside the trust region), ``masked_pos_fraction`` /
        ``masked_neg_fraction`` (by the sign of A), ``ratio_mean/min/max``, ``tv_mean``
        (mean |pi - mu|), ``kl_rollout`` (k3 estimate of KL(mu || pi)) and ``loss``.
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
    if logp.shape != rollout_logp.shape or logp.shape != loss_mask.shape:
        raise ValueError(f"logp {tuple(logp.shape)}, rollout_logp {tuple(rollout_logp.shape)} and "
                         f"loss_mask {tuple(loss_mask.shape)} must have the same [batch, tokens] shape")
    rollout_logp = rollout_logp.detach().to(logp.dtype)
    advantages = advantages.detach().to(logp.dtype)
    if advantages.dim() == 1:
        advantages = advantages[:, None].expand_as(logp)
    elif advantages.shape != logp.shape:
        raise ValueError(f"advantages must be [batch] or [batch, tokens], got {tuple(advantages.shape)}")
    mask = loss_mask.to(logp.dtype)

    ratio = torch.exp(logp - rollout_logp)
    with torch.no_grad():
        diff = logp.exp() - rollout_logp.exp()
        outside = ((advantages > 0) & (diff > delta_high)) | ((advantages < 0) & (-diff > delta_low))
        trust = (~outside).to(logp.dtype)
    per_token = -trust * ratio * advantages * mask

    if aggregation == "token_mean":
        total = per_token.sum()
        denom = float(mask.sum()) if normalizer is None else float(normalizer)
    else:
        seq_tokens = mask.sum(dim=-1)
        total = (per_token.sum(dim=-1) / seq_tokens.clamp(min=1)).sum()
        denom = float((seq_tokens > 0).sum()) if normalizer is None else float(normalizer)
    loss = total / max(denom, 1.0)
    return loss, _stats(loss, ratio, diff, outside, advantages, mask, logp, rollout_logp)


@torch.no_grad()
def _stats(loss: torch.Tensor, ratio: torch.Tensor, diff: torch.Tensor, outside: torch.Tensor,
           advantages: torch.Tensor, mask: torch.Tensor, logp: torch.Tensor,
           rollout_logp: torch.Tensor) -> dict[str, float]:
    on = mask > 0
    n = int(on.sum())
    pos, neg = on & (advantages > 0), on & (advantages < 0)
    stats: dict[str, float] = {"tokens": float(n), "loss": float(loss),
                               "pos_tokens": float(pos.sum()), "neg_tokens": float(neg.sum())}
    if n == 0:
        return stats | EMPTY_STATS
    r = ratio.detach()[on]
    log_r = (rollout_logp - logp.detach())[on]
    return stats | {
        "masked_fraction": float(outside[on].double().mean()),
        "masked_pos_fraction": float(outside[pos].double().sum() / max(stats["pos_tokens"], 1.0)),
        "masked_neg_fraction": float(outside[neg].double().sum() / max(stats["neg_tokens"], 1.0)),
        "ratio_mean": float(r.mean()),
        "ratio_min": float(r.min()),
        "ratio_max": float(r.max()),
        "tv_mean": float(diff[on].abs().mean()),
        "kl_rollout": float((log_r.exp() - log_r - 1).mean()),
    }


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0,
                   with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of ``targets`` [B, T] under ``logits`` [B, T, V] / temperature, and optionally
    the entropy of each position; computed row by row in fp32 to bound memory (one [T, V] copy)."""
    logps, entropies = [], []
    for row_logits, row_targets in zip(logits, targets):
        row = row_logits.float()
        if temperature != 1.0:
            row = row / temperature
        lse = torch.logsumexp(row, dim=-1)
        logps.append(row.gather(-1, row_targets[:, None]).squeeze(-1) - lse)
        if with_entropy:
            probs = torch.softmax(row, dim=-1)
            entropies.append(lse - (probs * row).sum(-1))
    return torch.stack(logps), (torch.stack(entropies) if with_entropy else None)


MEAN_STATS = ("masked_fraction", "ratio_mean", "tv_mean", "kl_rollout")


def merge_stats(parts: list[dict[str, float]]) -> dict[str, float]:
    """Combine the stats of several micro-batches (token-weighted means, min of mins, max of maxes)."""
    parts = [p for p in parts if p.get("tokens", 0) > 0]
    if not parts:
        return {"tokens": 0.0, "loss": 0.0, "pos_tokens": 0.0, "neg_tokens": 0.0, **EMPTY_STATS}
    n = sum(p["tokens"] for p in parts)
    merged = {"tokens": n, "loss": sum(p["loss"] for p in parts),
              "ratio_min": min(p["ratio_min"] for p in parts),
              "ratio_max": max(p["ratio_max"] for p in parts)}
    for key in MEAN_STATS + tuple(k for k in ("entropy",) if all(k in p for p in parts)):
        merged[key] = sum(p[key] * p["tokens"] for p in parts) / n
    for sign in ("pos", "neg"):
        count = sum(p[f"{sign}_tokens"] for p in parts)
        merged[f"{sign}_tokens"] = count
        merged[f"masked_{sign}_fraction"] = (
            sum(p[f"masked_{sign}_fraction"] * p[f"{sign}_tokens"] for p in parts) / max(count, 1.0))
    return merged
