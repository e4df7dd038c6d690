"""Weight sync: after each update the rollout engine generates with the new weights.

One interface, :class:`WeightSync` (``push(engine)`` after every optimizer step and after a
checkpoint load), four implementations:

- :class:`SharedModule` — in-process transformers engine (CPU default: ``tiny``,
  ``transformers``): the rollout engine generates with the very module DeepSpeed trains
  (ZeRO 0-2 update it in place), so nothing is copied.
- :class:`CopyWeights` — in-process engine with its own copy (another dtype or device, or
  ZeRO-3, whose parameters are sharded): the full weights are copied into it.
- :class:`VLLMServer` — a running ``vllm serve`` started with ``VLLM_SERVER_DEV_MODE=1`` and
  ``--weight-transfer-config '{"backend": "nccl"}'``: weights are broadcast over NCCL through
  vLLM's weight-transfer endpoints (TRL's ``VLLMClient``); the server is never restarted.
- :class:`VLLMColocated` — an in-process ``vllm.LLM``: ``model.load_weights`` (TRL's colocate path).

vLLM is imported lazily and only by the last two. mu in the DPPO ratio is always the
log-prob the rollout engine reported; start vLLM with ``--logprobs-mode processed_logprobs``
so it reports the temperature-scaled distribution the trainer compares against, and sample
with top_p=1, top_k=-1 (truncated sampling makes mu differ from any pi the trainer computes).
"""

from __future__ import annotations

from typing import Any, Iterator, Protocol

import torch

from aes.config import ConfigError, ModelConfig, TrainerConfig

IN_PROCESS_BACKENDS = ("tiny", "transformers", "hf")


class WeightSync(Protocol):
    """Makes the rollout engine generate with the trainer's current weights."""

    def push(self, engine: Any) -> None:
        """Called after every optimizer step (and after a checkpoint load) with the DeepSpeed engine."""

    def close(self) -> None: ...


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


class SharedModule:
    """The rollout engine holds the trained module itself; a push only counts versions.

    ``policy`` (e.g. :class:`aes.models.hf_chat.Policy`) gets its ``version`` bumped too.
    """

    def __init__(self, policy: Any = None) -> None:
        self.policy = policy
        self.version = 0

    def push(self, engine: Any) -> None:
        if engine.zero_optimization_stage() == 3:
            raise ConfigError("ZeRO-3 shards the parameters, so the rollout engine cannot share the trained "
                              "module; set trainer.weight_sync=copy (or use zero_stage <= 2)")
        self.version += 1
        if self.policy is not None and hasattr(self.policy, "version"):
            self.policy.version += 1

    def close(self) -> None:
        pass


class CopyWeights:
    """Copies the full weights into a separate module (the rollout engine's own copy)."""

    def __init__(self, target: torch.nn.Module):
        self.target = target
        self.version = 0

    @torch.no_grad()
    def push(self, engine: Any) -> None:
        params = dict(self.target.named_parameters())
        seen = set()
        for name, tensor in full_parameters(engine):
            if name not in params:
                raise KeyError(f"rollout module has no parameter {name!r}: it must be the same architecture")
            params[name].copy_(tensor.to(device=params[name].device, dtype=params[name].dtype))
            seen.add(name)
        if missing := set(params) - seen:
            raise KeyError(f"trained module lacks rollout parameters {sorted(missing)[:5]}")
        self.version += 1

    def close(self) -> None:
        pass


def _vllm_name(name: str) -> str:
    return name.removeprefix("module.")


class VLLMServer:
    """Broadcasts the weights to a running vLLM server over NCCL (no restart)."""

    def __init__(self, base_url: str, group_port: int = 51216):
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.group_port = group_port
        self.client: Any = None
        self.version = 0

    def _connect(self) -> Any:
        try:
            from trl.generation.vllm_client import VLLMClient
        except ImportError as exc:  # vllm missing
            raise ImportError("weight_sync=vllm_server needs vLLM: pip install 'aes[vllm]' on a GPU machine") from exc
        client = VLLMClient(base_url=self.base_url, group_port=self.group_port, connection_timeout=60.0)
        client.init_communicator(device=torch.cuda.current_device())
        return client

    @torch.no_grad()
    def push(self, engine: Any) -> None:
        is_main = not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0
        if not is_main:  # other ranks only take part in the ZeRO-3 gathers
            for _ in full_parameters(engine):
                pass
            return
        if self.client is None:
            self.client = self._connect()
        meta = [(_vllm_name(n), str(p.dtype).removeprefix("torch."), list(getattr(p, "ds_shape", p.shape)))
                for n, p in engine.module.named_parameters()]
        named = ((_vllm_name(n), t) for n, t in full_parameters(engine))
        self.client.update_named_params(meta, named)
        self.client.reset_prefix_cache()
        self.version += 1

    def close(self) -> None:
        if self.client is not None:
            self.client.close_communicator()
            self.client = None


class VLLMColocated:
    """Loads the weights into an in-process ``vllm.LLM`` (same GPU as the trainer)."""

    def __init__(self, llm: Any):
        self.llm = llm
        self.version = 0

    @torch.no_grad()
    def push(self, engine: Any) -> None:
        model = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
        for name, tensor in full_parameters(engine):
            model.load_weights([(_vllm_name(name), tensor)])
        self.llm.reset_prefix_cache()
        self.version += 1

    def close(self) -> None:
        pass


def build_weight_sync(cfg: TrainerConfig, solver: ModelConfig, rollout: Any = None) -> WeightSync:
    """The sync ``trainer.weight_sync`` names; ``auto`` follows ``solver.backend``.

    ``rollout`` is what the rollout engine generates with: the policy (whose ``version`` is
    bumped) for ``shared``, the module for ``copy``, the ``vllm.LLM`` for ``vllm_colocate``.
    """
    mode = cfg.weight_sync
    if mode == "auto":
        if solver.backend in IN_PROCESS_BACKENDS:
            mode = "shared"
        elif solver.backend == "openai_compatible":
            mode = "vllm_server"
        else:
            raise ConfigError(
                f"solver.backend={solver.backend} cannot take new weights: train an in-process solver "
                f"(solver.backend one of {', '.join(IN_PROCESS_BACKENDS)}) or a vLLM server "
                "(openai_compatible), or set trainer.weight_sync explicitly")
    if mode == "shared":
        return SharedModule(rollout)
    if mode == "copy":
        module = getattr(rollout, "model", rollout)
        if not isinstance(module, torch.nn.Module):
            raise ConfigError("trainer.weight_sync=copy needs the rollout engine's module (or its policy)")
        return CopyWeights(module)
    if mode == "vllm_server":
        if not solver.base_url:
            raise ConfigError("trainer.weight_sync=vllm_server needs solver.base_url (the vLLM server)")
        return VLLMServer(solver.base_url, cfg.vllm_group_port)
    if rollout is None:
        raise ConfigError("trainer.weight_sync=vllm_colocate needs the in-process vllm.LLM")
    return VLLMColocated(rollout)
