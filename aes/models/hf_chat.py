"""Chat generation from an in-process transformers model with exact token ids and log-probs.

:class:`TransformersChat` samples token by token from a :class:`Policy` (model + tokenizer)
that a trainer in the same process may update between calls: the next ``chat`` uses the
current weights. For every generated token it records the id and its log-prob under the
very distribution it was sampled from, ``log_softmax(logits / temperature)`` in fp32; at
temperature 0 it decodes greedily (a point mass: log-prob 0).

``prompt_token_ids`` are the tokenizer's ids of the chat-template rendering, and they are
exactly what the model consumed, so ``prompt_token_ids + completion_token_ids`` re-scored
with :meth:`Policy.sequence_logprobs` reproduces ``completion_logprobs``.

:class:`aes.models.tiny.TinyChat` uses this with a tiny random model; :func:`load_gguf_policy`
loads SmolLM2-135M-Instruct from its GGUF as a trainable fp32 model (~2.8 GiB peak).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from aes.config import ModelConfig
from aes.models.base import (
    BaseChatModel,
    ChatResult,
    ModelError,
    RunBudget,
    ToolSpec,
    Usage,
)
from aes.models.local import chat_messages


@dataclass(eq=False)
class Policy:
    """A transformers causal LM and its tokenizer, shared by the chat backends and a trainer.

    Hold :attr:`lock` while changing the weights: generation holds it for a whole call, so a
    call never mixes two versions of the weights. Bump :attr:`version` after each update.
    """

    model: Any
    """A ``transformers`` causal LM (``PreTrainedModel``)."""
    tokenizer: Any
    """Its ``PreTrainedTokenizerFast``, with a chat template."""
    name: str = ""
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    version: int = 0

    @property
    def eos_token_ids(self) -> list[int]:
        """Tokens that end a turn: the tokenizer's EOS and those of the generation config."""
        ids: set[int] = set()
        for value in (self.tokenizer.eos_token_id,
                      getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)):
            if isinstance(value, int):
                ids.add(value)
            elif value:
                ids.update(int(v) for v in value)
        return sorted(ids)

    def render(self, messages: list[dict[str, Any]]) -> str:
        """The chat-template rendering of ``messages``, ending with the assistant header."""
        return self.tokenizer.apply_chat_template(chat_messages(messages), tokenize=False,
                                                  add_generation_prompt=True)

    def encode(self, text: str) -> list[int]:
        """Token ids of an already rendered prompt (the template carries any special tokens)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        return self.encode(self.render(messages))

    @contextmanager
    def eval_mode(self) -> Iterator[None]:
        """Hold the lock with the model in eval mode (restored afterwards)."""
        with self.lock:
            was_training = self.model.training
            self.model.eval()
            try:
                yield
            finally:
                self.model.train(was_training)

    def sequence_logprobs(self, prompt_ids: list[int], completion_ids: list[int],
                          temperature: float = 1.0) -> torch.Tensor:
        """Log-probs of ``completion_ids`` after ``prompt_ids`` under ``softmax(logits / T)`` (no grad)."""
        ids = torch.tensor([list(prompt_ids) + list(completion_ids)], dtype=torch.long, device=_device(self.model))
        with self.eval_mode(), torch.no_grad():
            logits = self.model(input_ids=ids).logits[0, len(prompt_ids) - 1:-1].float().cpu()
        logp = torch.log_softmax(logits / max(float(temperature), 1e-6), dim=-1)
        return logp.gather(-1, torch.tensor(completion_ids, dtype=torch.long)[:, None])[:, 0]


def _device(model: Any) -> torch.device:
    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")


@dataclass
class Sample:
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    """stop (an EOS token was sampled; it is the last id) or length."""


@torch.no_grad()
def sample_tokens(model: Any, prompt_ids: list[int], *, max_new_tokens: int, temperature: float,
                  eos_token_ids: list[int], generator: torch.Generator | None = None) -> Sample:
    """Sample up to ``max_new_tokens`` tokens after ``prompt_ids`` with a KV cache.

    Each token is drawn from ``softmax(logits / temperature)`` (fp32) and its log-prob is read
    from that same tensor; ``temperature`` 0 picks the argmax with log-prob 0.
    """
    if not prompt_ids:
        raise ModelError("empty prompt")
    device = _device(model)
    eos = set(eos_token_ids)
    ids: list[int] = []
    logprobs: list[float] = []
    # transformers 5.24 names the KV cache ``cache`` (``past_key_values`` is deprecated).
    out = model(input_ids=torch.tensor([prompt_ids], dtype=torch.long, device=device), use_cache=True,
                logits_to_keep=1)
    for step in range(max_new_tokens):
        logits = out.logits[0, -1].float().cpu()  # sampled on the CPU with the CPU generator
        if temperature > 0:
            logp = torch.log_softmax(logits / temperature, dim=-1)
            token = int(torch.multinomial(logp.exp(), 1, generator=generator).item())
            lp = float(logp[token].item())
        else:
            token, lp = int(torch.argmax(logits).item()), 0.0
        ids.append(token)
        logprobs.append(lp)
        if token in eos:
            return Sample(ids, logprobs, "stop")
        if step + 1 < max_new_tokens:
            out = model(input_ids=torch.tensor([[token]], dtype=torch.long, device=device), cache=out.cache,
                        use_cache=True, logits_to_keep=1)
    return Sample(ids, logprobs, "length")


class TransformersChat(BaseChatModel):
    """A chat backend over a :class:`Policy` in this process (generation is serialised)."""

    supports_tools = False
    supports_token_ids = True

    def __init__(self, cfg: ModelConfig, budget: RunBudget | None = None, policy: Policy | None = None):
        super().__init__(cfg, budget)
        if policy is None:
            raise ModelError(f"{cfg.name}: TransformersChat needs a policy")
        self.policy = policy
        if cfg.threads:  # torch's thread count is per process: it also applies to a trainer here
            torch.set_num_threads(int(cfg.threads))
        # Each call draws its own seed: reproducible in call order for a fixed cfg.seed.
        self._rng = random.Random(cfg.seed) if cfg.seed is not None else random.SystemRandom()
        self._rng_lock = threading.Lock()
        self._closed = False

    @property
    def weights_version(self) -> int:
        """The shared policy's version (bumped by the trainer's weight sync after each update)."""
        return int(getattr(self.policy, "version", 0))

    def render(self, messages: list[dict[str, Any]]) -> str:
        return self.policy.render(messages)

    def unavailable_hint(self) -> str:
        return f"the in-process model {self.policy.name or self.config.model!r} is not loaded"

    def health_check(self) -> None:
        """The policy's model and tokenizer are loaded in this process and the model is open."""
        if self._closed:
            raise self.unavailable("model is closed")
        if self.policy.model is None or self.policy.tokenizer is None:
            raise self.unavailable("the policy has no model or tokenizer")

    def _chat_once(self, messages: list[dict[str, Any]], tools: list[ToolSpec] | None,
                   max_tokens: int, temperature: float) -> ChatResult:
        if self._closed:
            raise self.unavailable("model is closed")
        policy = self.policy
        prompt_ids = policy.prompt_ids(messages)
        room = self.config.context_length - len(prompt_ids)
        if room <= 0:
            raise ModelError(f"{self.config.name}: prompt of {len(prompt_ids)} tokens leaves no room in "
                             f"context_length={self.config.context_length}")
        with self._rng_lock:
            seed = self._rng.randrange(2**63)
        generator = torch.Generator().manual_seed(seed)
        with policy.eval_mode():
            sample = sample_tokens(policy.model, prompt_ids, max_new_tokens=min(max_tokens, room),
                                   temperature=temperature, eos_token_ids=policy.eos_token_ids,
                                   generator=generator)
        text_ids = sample.token_ids[:-1] if sample.finish_reason == "stop" else sample.token_ids
        text = policy.tokenizer.decode(text_ids, skip_special_tokens=False)
        return ChatResult(text=text, finish_reason=sample.finish_reason,
                          usage=Usage(prompt_tokens=len(prompt_ids), completion_tokens=len(sample.token_ids)),
                          model=self.config.model, prompt_token_ids=prompt_ids,
                          completion_token_ids=sample.token_ids, completion_logprobs=sample.logprobs)

    def close(self) -> None:
        self._closed = True


def load_gguf_policy(model: str = "smollm2-135m-instruct", *, dtype: torch.dtype = torch.float32) -> Policy:
    """SmolLM2 (or another GGUF) as a trainable transformers model, dequantised (~2.8 GiB peak).

    Needs the ``gguf`` package. Its tokenizer is transformers' conversion of the GGUF
    vocabulary; a trainer fed ``prompt_token_ids + completion_token_ids`` from
    :class:`aes.models.local.LocalChat` does not need it.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from aes.models.local import resolve_gguf

    path = resolve_gguf(model)
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    net = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=dtype)
    # The weights are dequantised: the model is plain fp32, but transformers still flags it as
    # quantised, and save_pretrained and trainers then refuse it.
    net.is_quantized, net.hf_quantizer = False, None
    if hasattr(net.config, "quantization_config"):
        del net.config.quantization_config
    return Policy(model=net, tokenizer=tokenizer, name=str(path))
