"""What every weight sync shares: the trainer's full parameters, the rank that talks to the rollout
engine, and the block inside which a chat client's weights change (:mod:`aes.train.sync` and
:mod:`aes.train.vllm_reload` build on it; it imports neither)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch


def full_parameters(engine: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, full tensor) for every parameter, gathered one at a time under ZeRO-3."""
    module = engine.module
    if engine.zero_optimization_stage() == 3:
        import deepspeed

        for name, param in module.named_parameters():
            with deepspeed.zero.GatheredParameters([param]):
                yield name, param.data
    else:
        for name, param in module.named_parameters():
            yield name, param.data


def _is_main() -> bool:
    """Rank 0 (or no process group): the rank that talks to the rollout engine."""
    return not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0


@contextlib.contextmanager
def new_weights(chat: Any) -> Iterator[None]:
    """The weights behind ``chat`` change inside this block: its calls in flight finish first, new
    ones wait (``chat.gate``), and once the block is done the chat client counts the update
    (``chat.weights_updated``), so the calls after it record the new policy version. Episodes in
    flight go on with the new weights (carried rollouts). A block that raises counts no update."""
    gate = getattr(chat, "gate", None)
    with gate.swap() if gate is not None else contextlib.nullcontext():
        yield
        if hasattr(chat, "weights_updated"):
            chat.weights_updated()
