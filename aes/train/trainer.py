"""DPPOTrainer: one policy update per call, on the DeepSpeed engine, then a weight sync.

The flywheel calls::

    trainer = DPPOTrainer(cfg.trainer, policy, sync)      # policy: module or object with .model
    batch = GroupBatcher(cfg.trainer.envs_per_update).fill(groups)
    stats = trainer.update(batch)                          # loss, trust-region and reward stats
    trainer.save(run_dir / "checkpoints")                  # resumable; trainer.load(...) restores

An update: group advantages -> sequences -> micro-batches under ``micro_batch_tokens`` ->
forward/backward of each (gradients accumulate; the loss of each is already divided by the
token count of the whole update) -> one optimizer step (clip, AdamW) -> ``sync.push``.
Sequences whose advantage is exactly 0 count in the denominator but are not run: their loss
and gradient are exactly 0.

:class:`PolicyTrainer` is what every objective shares: the engine around the policy, one
optimizer step over micro-batches (:meth:`PolicyTrainer.optimizer_step`), the weight sync and
the checkpoints. :meth:`PolicyTrainer.sft_update` is the supervised step of the cold start
(``mode=sft``, :mod:`aes.train.sft`): token-mean negative log-likelihood of the
policy-generated tokens. :class:`DPPOTrainer` adds :meth:`DPPOTrainer.update`. Checkpoints
of either are the same DeepSpeed checkpoint, so a cold-start checkpoint resumes under DPPO.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from aes.config import ConfigError, TrainerConfig
from aes.train.advantages import Batch, advantage_samples
from aes.train.batching import collate, pack, shard
from aes.train.dppo import dppo_loss, merge_stats, token_logprobs

log = logging.getLogger(__name__)
LOSSES = {"dppo": dppo_loss}
"""Registered policy-gradient variants (``trainer.algorithm``): name -> loss over a micro-batch."""
from aes.train.engine import build_engine, load_checkpoint, save_checkpoint
from aes.train.episodes import Group, Sample
from aes.train.sync import SharedModule, WeightSync, full_parameters


def policy_module(policy: Any) -> torch.nn.Module:
    """The trainable module of ``policy``: the module itself or its ``.model``."""
    if isinstance(policy, torch.nn.Module):
        return policy
    model = getattr(policy, "model", None)
    if isinstance(model, torch.nn.Module):
        return model
    raise TypeError(f"cannot train {type(policy).__name__}: pass a torch module (a transformers causal LM) "
                    "or an object whose .model is one (e.g. TinyChat.policy)")


def disable_dropout(model: torch.nn.Module) -> None:
    """Dropout would make pi differ from the mu the rollout engine sampled with."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    config = getattr(model, "config", None)
    for key in ("attention_dropout", "hidden_dropout", "dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop"):
        if config is not None and isinstance(getattr(config, key, None), float):
            setattr(config, key, 0.0)


def _drop_gguf_flag(model: torch.nn.Module) -> None:
    """transformers flags a model loaded from a GGUF as quantised although its weights are
    dequantised tensors, and then refuses to save it; a trained model is plain weights."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None and type(quantizer).__name__ == "GgufHfQuantizer":
        model.is_quantized, model.hf_quantizer = False, None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config


class PolicyTrainer:
    """The DeepSpeed engine around ``policy``: optimizer steps over micro-batches, the weight
    sync to the rollout engine, checkpoints and exports. Objectives are methods on top of it
    (:meth:`sft_update` here, :meth:`DPPOTrainer.update`).

    ``policy`` is a transformers causal LM or an object whose ``.model`` is one (e.g.
    :class:`aes.models.hf_chat.Policy`); when it has a ``lock`` every step holds it, so an
    in-process rollout never samples from half-updated weights. ``sync`` defaults to
    :class:`SharedModule` (the rollout engine generates with this very module).
    """

    def __init__(self, cfg: TrainerConfig, policy: Any, sync: WeightSync | None = None,
                 pad_id: int | None = None):
        if cfg.algorithm not in LOSSES:
            raise ConfigError(f"trainer.algorithm={cfg.algorithm} is not registered: choose one of {', '.join(LOSSES)}")
        if cfg.kl_coef:
            raise ConfigError("trainer.kl_coef must be 0: a KL term needs a reference model, which aes does not keep")
        self.loss = LOSSES[cfg.algorithm]
        self.cfg = cfg
        self.model = policy_module(policy)
        self.tokenizer = getattr(policy, "tokenizer", None)
        disable_dropout(self.model)
        _drop_gguf_flag(self.model)
        config = getattr(self.model, "config", None)
        self.pad_id = pad_id if pad_id is not None else int(getattr(config, "pad_token_id", None) or 0)
        self.engine = build_engine(self.model, cfg)
        self.sync: WeightSync = sync if sync is not None else SharedModule(policy)
        self.lock = getattr(policy, "lock", None) or nullcontext()
        self.step = 0
        dist = torch.distributed
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()

    @property
    def device(self) -> torch.device:
        return self.engine.device

    def optimizer_step(self, samples: Sequence[Sample], backward: Callable[[Any], dict[str, float]],
                       start: float | None = None) -> tuple[list[dict[str, float]], dict[str, float]]:
        """One optimizer step on ``samples``: packed into micro-batches under
        ``micro_batch_tokens``, this rank's share collated and passed to ``backward`` (which runs
        forward + ``engine.backward`` and returns its stats), then clip + AdamW, then the sync.

        Returns the per-micro-batch stats and the step's own: step, trained_tokens,
        padding_fraction, micro_batches, grad_norm, lr, update_seconds, sync_seconds,
        trained_tokens_per_second.
        """
        start = time.perf_counter() if start is None else start
        micro_batches = shard(pack(list(samples), self.cfg.micro_batch_tokens), self.rank, self.world_size)
        parts, trained, padded = [], 0, 0
        with self.lock:
            self.engine.train()
            for i, mb_samples in enumerate(micro_batches, 1):
                mb = collate(mb_samples, self.pad_id).to(self.device)
                parts.append(backward(mb))
                trained += int(mb.attention_mask.sum()) if mb_samples else 0
                padded += mb.input_ids.numel() if mb_samples else 0
                log.info("update %d: micro-batch %d/%d done (%d tokens, %.0f s so far)", self.step + 1, i,
                         len(micro_batches), int(mb.attention_mask.sum()) if mb_samples else 0,
                         time.perf_counter() - start)
            self.engine.step()
            self.engine.eval()
            self.step += 1
            compute = time.perf_counter() - start
            log.info("update %d: optimizer step done in %.0f s; pushing the weights to the rollout engine",
                     self.step, compute)
            self.sync.push(self.engine)
        grad_norm = self.engine.get_global_grad_norm()
        return parts, {
            "step": float(self.step), "trained_tokens": float(trained),
            "padding_fraction": 1.0 - trained / padded if padded else 0.0,
            "micro_batches": float(len(micro_batches)),
            "grad_norm": float(grad_norm) if grad_norm is not None else float("nan"),
            "lr": float(self.engine.get_lr()[0]), "update_seconds": compute,
            "sync_seconds": time.perf_counter() - start - compute,
            "trained_tokens_per_second": trained / compute if compute > 0 else 0.0,
        }

    # -- supervised fine-tuning (the cold start, paper App. H) ---------------------------

    def sft_update(self, samples: Sequence[Sample]) -> dict[str, float]:
        """One supervised step: token-mean negative log-likelihood over the policy-generated
        tokens (``loss_mask``) of ``samples``, taken over the whole step (every micro-batch is
        divided by the step's token count). Prompt, tool-output and template tokens are context
        only. Log-probs, advantages and ``trainer.temperature`` play no part (logits at T = 1)."""
        samples = list(samples)
        loss_tokens = sum(s.loss_tokens for s in samples)
        if loss_tokens == 0:
            raise ValueError("nothing to train on: the samples hold no policy-generated tokens")
        start = time.perf_counter()
        parts, step = self.optimizer_step(
            samples, lambda mb: self._nll_backward(mb, loss_tokens / self.world_size), start)
        nll_sum, tokens = self._all_ranks(sum(p["nll_sum"] for p in parts), sum(p["tokens"] for p in parts))
        return {**step, "loss": nll_sum / max(tokens, 1.0), "loss_tokens": float(loss_tokens),
                "sequences": float(len(samples))}

    def _nll_backward(self, mb: Any, normalizer: float) -> dict[str, float]:
        logp, mask = self._target_logprobs(mb)
        nll_sum = -(logp * mask).sum()
        self.engine.backward(nll_sum / max(normalizer, 1.0), scale_wrt_gas=False)
        return {"nll_sum": float(nll_sum.detach()), "tokens": float(mask.sum())}

    def _target_logprobs(self, mb: Any, temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probs of the targets in the columns where some row has a loss token (prompts and
        tool outputs need no logits), and the loss mask of those columns."""
        cols = mb.loss_mask.any(dim=0).nonzero().squeeze(-1)
        logits = self.engine(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False,
                             logits_to_keep=cols).logits
        logp, _ = token_logprobs(logits, mb.targets[:, cols], temperature)
        return logp, mb.loss_mask[:, cols]

    @torch.no_grad()
    def nll(self, samples: Sequence[Sample]) -> dict[str, float]:
        """Token-mean negative log-likelihood of the loss tokens of ``samples`` under the current
        weights (no update; every rank runs all samples, so ZeRO-3 gathers line up)."""
        total, tokens = 0.0, 0.0
        with self.lock:
            self.engine.eval()
            for mb_samples in pack(list(samples), self.cfg.micro_batch_tokens):
                mb = collate(mb_samples, self.pad_id).to(self.device)
                logp, mask = self._target_logprobs(mb)
                total -= float((logp * mask).sum())
                tokens += float(mask.sum())
        return {"nll": total / max(tokens, 1.0), "tokens": tokens}

    def _all_ranks(self, *values: float) -> tuple[float, ...]:
        """Sums of ``values`` over the data-parallel ranks (each rank ran its own micro-batches)."""
        if self.world_size == 1:
            return values
        summed = torch.tensor(values, dtype=torch.float64, device=self.device)
        torch.distributed.all_reduce(summed)
        return tuple(summed.tolist())

    # -- the rollout engine and checkpoints -----------------------------------------------

    def push_weights(self) -> None:
        """Sync the rollout engine now (e.g. once before the first rollout, so that a llama.cpp
        engine serves the exact trained weights instead of the shipped quantised file)."""
        with self.lock:
            self.sync.push(self.engine)

    def save(self, directory: str | Path) -> Path:
        """A resumable DeepSpeed checkpoint (model, optimizer, step) under ``directory``."""
        tag = save_checkpoint(self.engine, directory, self.step, {"step": self.step}, keep=self.cfg.keep_checkpoints)
        return Path(directory) / tag

    def load(self, directory: str | Path, tag: str | None = None) -> int:
        """Restore the latest (or ``tag``) checkpoint, push it to the rollout engine; returns the step."""
        with self.lock:
            state = load_checkpoint(self.engine, directory, tag)
            self.step = int(state.get("step", 0))
            self.sync.push(self.engine)
        return self.step

    def export(self, directory: str | Path) -> Path:
        """The current weights as a transformers checkpoint (for a vLLM restart or evaluation)."""
        state = {name: t.detach().to("cpu", copy=True) for name, t in full_parameters(self.engine)}
        if self.rank == 0:
            self.model.save_pretrained(directory, state_dict=state)
            if self.tokenizer is not None:
                self.tokenizer.save_pretrained(directory)
        return Path(directory)

    def close(self) -> None:
        self.sync.close()


class DPPOTrainer(PolicyTrainer):
    """Trains ``policy`` with DPPO through DeepSpeed and keeps the rollout engine in sync
    (engine, sync, checkpoints: :class:`PolicyTrainer`)."""

    def update(self, groups: Batch | Sequence[Group]) -> dict[str, float]:
        """One DPPO update on ``groups`` (each centred on its own mean); returns its stats."""
        if not isinstance(groups, Batch):
            groups = list(groups)
        batch = groups if isinstance(groups, Batch) else Batch(groups, len(groups), len(groups))
        start = time.perf_counter()
        samples = advantage_samples(batch.groups)
        loss_tokens = sum(s.loss_tokens for s in samples)
        if loss_tokens == 0:
            raise ValueError("nothing to train on: the groups hold no policy-generated tokens")
        normalizer = loss_tokens if self.cfg.aggregation == "token_mean" else len(samples)
        active = [s for s in samples if s.advantage != 0.0]
        parts, step = self.optimizer_step(
            active, lambda mb: self._backward(mb, normalizer / self.world_size, loss_tokens / self.world_size),
            start)
        return {
            **batch.stats(), **merge_stats(parts), **step,
            "sequences": float(len(samples)), "loss_tokens": float(loss_tokens),
            "skipped_sequences": float(len(samples) - len(active)),
            "truncated_tokens": float(sum(e.truncated_tokens for g in batch.groups for e in g.episodes)),
        }

    def _backward(self, mb: Any, normalizer: float, tokens: float) -> dict[str, float]:
        cfg = self.cfg
        # logits only where some row has a loss token (prompts and tool outputs need none)
        cols = mb.loss_mask.any(dim=0).nonzero().squeeze(-1)
        logits = self.engine(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False,
                             logits_to_keep=cols).logits
        logp, entropy = token_logprobs(logits, mb.targets[:, cols], cfg.temperature,
                                       with_entropy=cfg.entropy_coef > 0)
        del logits
        mask = mb.loss_mask[:, cols]
        loss, stats = self.loss(logp, mb.rollout_logp[:, cols], mb.advantages, mask, cfg.delta_low,
                                cfg.delta_high, aggregation=cfg.aggregation, normalizer=normalizer)
        if entropy is not None:
            bonus = (entropy * mask).sum() / max(tokens, 1.0)  # a token mean in either aggregation
            loss = loss - cfg.entropy_coef * bonus
            stats["entropy"] = float((entropy * mask).sum() / mask.sum().clamp(min=1))
        self.engine.backward(loss, scale_wrt_gas=False)
        return stats
