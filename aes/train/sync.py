"""Weight sync: after each update the rollout engine generates with the new weights.

One interface, :class:`WeightSync` (``push(engine)`` after every optimizer step and after a
checkpoint load), five implementations:

- :class:`GGUFExport` — llama.cpp in process (``local``, the CPU default for SmolLM2): the
  weights are written as an F32 GGUF and the engine reloads it (2.9 s export + 0.5 s reload
  per update for 135M). Chosen over transformers generation on CPU by measurement
  (``benchmarks/train_step.py``, SmolLM2-135M, 2 cores): llama.cpp on the re-exported F32
  file 32-37 tok/s per stream (Q4_1: 51-70) vs transformers 16 tok/s, and llama.cpp serves
  concurrent attempts in parallel slots; its log-probs are within 0.0016 nats of the
  trainer's pi on average (the shipped Q4_1 file: 0.067), so mu stays trustworthy.
- :class:`SharedModule` — in-process transformers engine (``tiny``, ``transformers``): the
  rollout engine generates with the very module DeepSpeed trains (ZeRO 0-2 update it in
  place), so nothing is copied. Used for the tiny test model, which has no GGUF.
- :class:`CopyWeights` — in-process engine with its own copy (another dtype or device, or
  ZeRO-3, whose parameters are sharded): the full weights are copied into it.
- :class:`VLLMServer` — a running ``vllm serve`` started with ``VLLM_SERVER_DEV_MODE=1`` and
  ``--weight-transfer-config '{"backend": "nccl"}'``: weights are broadcast over NCCL through
  vLLM's weight-transfer endpoints (TRL's ``VLLMClient``); the server is never restarted.
  The chat client's calls are held while the weights change and the update is counted on it.
- :class:`VLLMColocated` — an in-process ``vllm.LLM``: ``model.load_weights`` (TRL's colocate path);
  a building block for a future in-process vLLM solver backend (no config value reaches it yet).
- :class:`aes.train.vllm_reload.VLLMReload` — running vLLM servers on CPU (or wherever NCCL is not
  available): a safetensors checkpoint each server reloads in place through vLLM's own endpoints,
  with the servers paused (``/pause?mode=keep``) and the policy version set on them.
- :class:`VLLMServers` — several such servers (``solver.base_urls``): the same broadcast to each,
  on its own rendezvous port (``trainer.vllm_group_port`` + i).
- ``llamacpp_server`` — llama.cpp servers the job started (``cluster.backend=llamacpp``): a
  :class:`GGUFExport` whose reload restarts every server on its port with the new file
  (:meth:`aes.cluster.servers.ServerGroup.reload`); the client's gate holds calls meanwhile.

Every sync whose rollout engine is a chat client (gguf, llamacpp_server, vllm_server) changes
the weights inside :func:`new_weights`: calls in flight finish first, new ones wait, and the chat
client counts the update (``weights_updated``), so every model call records the policy version
that served it (``ChatResult.policy_version``; carried rollouts end at ``flywheel.carry_max_updates``
by it).

vLLM is imported lazily and only by the vLLM syncs. mu in the DPPO ratio is always the
log-prob the rollout engine reported; start vLLM with ``--logprobs-mode processed_logprobs``
so it reports the temperature-scaled distribution the trainer compares against, and sample
with top_p=1, top_k=-1 (truncated sampling makes mu differ from any pi the trainer computes).
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch

from aes.config import ConfigError, ModelConfig, TrainerConfig
from aes.train.weights import _is_main, full_parameters, new_weights  # noqa: F401 - the syncs' shared parts

log = logging.getLogger(__name__)


DEFAULT_SYNCS: dict[str, Callable[[ModelConfig], str]] = {}
"""What ``trainer.weight_sync=auto`` means per ``solver.backend`` (filled by :mod:`aes.train.backends`,
which knows the backends; this module only the syncs)."""


class WeightSync(Protocol):
    """Makes the rollout engine generate with the trainer's current weights."""

    def push(self, engine: Any) -> None:
        """Called after every optimizer step (and after a checkpoint load) with the DeepSpeed engine."""

    def close(self) -> None: ...


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


def swap_local_engine(chat: Any, path: Path) -> None:
    """Point a :class:`aes.models.local.LocalChat` at another GGUF (inside :func:`new_weights`)."""
    from aes.models.local import acquire_engine, release_engine

    with new_weights(chat):
        old = chat.engine
        chat.engine = acquire_engine(path, slot_ctx=chat.config.context_length, parallel=chat.config.parallel,
                                     threads=chat.config.threads)
        chat.model_path = path
        release_engine(old)


class GGUFExport:
    """Writes the weights as an F32 GGUF (metadata from ``template``) and has llama.cpp load it.

    ``reload(path)`` switches the rollout engine to the new file; the last ``keep`` files stay.
    """

    def __init__(self, template: str | Path, reload: Callable[[Path], None], out_dir: str | Path | None = None,
                 keep: int = 1):
        self.template = Path(template)
        self.reload = reload
        self.out_dir = Path(out_dir or tempfile.mkdtemp(prefix="aes-gguf-"))
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.keep = max(1, keep)
        self.version = 0

    @torch.no_grad()
    def push(self, engine: Any) -> None:
        from aes.train.gguf_export import export_gguf

        params = full_parameters(engine)
        if not _is_main():
            for _ in params:
                pass
            return
        path = export_gguf(params, engine.module.config, self.template,
                           self.out_dir / f"policy-v{self.version + 1}.gguf")
        self.reload(path)
        self.version += 1
        for old in sorted(self.out_dir.glob("policy-v*.gguf"), key=lambda p: p.stat().st_mtime)[:-self.keep]:
            old.unlink(missing_ok=True)

    def close(self) -> None:
        """The exports are the rollout engine's copy of the weights, rebuilt from the checkpoint on
        resume: none is left in the run dir."""
        for old in self.out_dir.glob("policy-v*.gguf"):
            old.unlink(missing_ok=True)


def _vllm_name(name: str) -> str:
    return name.removeprefix("module.")


class VLLMServer:
    """Broadcasts the weights to a running vLLM server over NCCL (no restart).

    ``chat`` is the client the rollouts go through (:class:`aes.models.openai_client.OpenAIChat`):
    its calls are held during the broadcast and it counts the update (:func:`new_weights`).
    ``client`` is TRL's ``VLLMClient``, connected on the first push."""

    def __init__(self, base_url: str, group_port: int = 51216, chat: Any = None):
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.group_port = group_port
        self.chat = chat
        self.client: Any = None
        self.version = 0

    def connect(self) -> None:
        """Join the server's NCCL group (once; before any gate is held: it may take a minute)."""
        if self.client is None:
            self.client = self._connect()

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
        if not _is_main():  # other ranks only take part in the ZeRO-3 gathers
            for _ in full_parameters(engine):
                pass
            return
        self.connect()
        with new_weights(self.chat):
            self.send(engine)

    @torch.no_grad()
    def send(self, engine: Any) -> None:
        """The broadcast itself (rank 0, connected), with no gate: :class:`VLLMServers` holds one around
        all servers."""
        meta = [(_vllm_name(n), str(p.dtype).removeprefix("torch."), list(getattr(p, "ds_shape", p.shape)))
                for n, p in engine.module.named_parameters()]
        named = ((_vllm_name(n), t) for n, t in full_parameters(engine))
        self.client.update_named_params(meta, named)
        self.client.reset_prefix_cache()
        self.version += 1
        label_version(self.base_url, self.chat)

    def close(self) -> None:
        if self.client is not None:
            self.client.close_communicator()
            self.client = None


def label_version(root: str, chat: Any) -> None:
    """Tell a vLLM server the policy version it now serves (``GET /weight_info`` reads it back: clients on
    other machines record it). A server that cannot be told is logged: the weights are in, only the
    label of other processes' calls is missing."""
    from aes.train.vllm_reload import ReloadError, call

    version = (getattr(chat, "weights_version", None) or 0) + 1
    try:
        call(root, "/update_weight_version", {"new_version": str(version)}, timeout=30.0)
    except ReloadError as exc:
        log.warning("the vLLM server at %s was not told its policy version %d: %s", root, version, exc)


class VLLMServers:
    """:class:`VLLMServer` for each of several servers (each on its own rendezvous port); the chat
    client's calls are held until every server has the new weights, and the update counts once."""

    def __init__(self, base_urls: list[str], group_port: int = 51216, chat: Any = None):
        self.servers = [VLLMServer(url, group_port + i, chat=chat) for i, url in enumerate(base_urls)]
        self.chat = chat
        self.version = 0

    def push(self, engine: Any) -> None:
        if not _is_main():
            for server in self.servers:
                server.push(engine)
            return
        for server in self.servers:
            server.connect()
        with new_weights(self.chat):
            for server in self.servers:
                server.send(engine)
        self.version += 1

    def close(self) -> None:
        for server in self.servers:
            server.close()


_SERVERS: Any = None
"""The rollout servers this process started (an :class:`aes.cluster.servers.ServerGroup`), set by the
job (:func:`aes.cluster.servers.activate`): the llama.cpp sync restarts them with new weights."""


def use_servers(group: Any) -> None:
    """Register the servers this process started (None: none), for ``llamacpp_server``."""
    global _SERVERS
    _SERVERS = group


def restart_llamacpp_servers(chat: Any) -> Callable[[Path], None]:
    """The reload of ``llamacpp_server``: restart the servers this process started with a new GGUF,
    no call in flight (``chat.gate``), and count the update on the chat model."""

    def reload(path: Path) -> None:
        group = _SERVERS
        if group is None:
            raise ConfigError("trainer.weight_sync=llamacpp_server restarts the llama.cpp servers this job started "
                              "(cluster.servers > 0, cluster.backend=llamacpp); none run in this process")
        with new_weights(chat):
            group.reload(path)

    return reload


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


def build_weight_sync(cfg: TrainerConfig, solver: ModelConfig, rollout: Any = None,
                      out_dir: str | Path | None = None, mode: str | None = None) -> WeightSync | None:
    """The weight sync ``mode`` (default ``trainer.weight_sync``; which ones a solver backend can
    do, and what ``auto`` means for it, is :mod:`aes.train.backends`' business).

    ``rollout`` is what the rollout engine generates with: the policy (whose ``version`` is
    bumped) for ``shared``, the module for ``copy``, the chat client (whose calls are held and
    which counts the update) for ``gguf``, ``llamacpp_server``, ``vllm_server`` and ``vllm_reload``.
    ``out_dir`` holds the GGUF exports or the reload checkpoints (default: a temp dir).
    """
    mode = mode or cfg.weight_sync
    if mode == "auto":  # the solver backend's default (registered by aes/train/backends.py)
        pick = DEFAULT_SYNCS.get(solver.backend)
        if pick is None:
            raise ConfigError(f"solver.backend={solver.backend} cannot take new weights: train an open solver "
                              f"({', '.join(DEFAULT_SYNCS)})")
        mode = pick(solver)
    if mode == "none":
        return None
    if mode == "gguf":
        from aes.models.local import resolve_gguf

        if rollout is None:
            raise ConfigError("trainer.weight_sync=gguf needs the LocalChat rollout engine")
        reload = getattr(rollout, "reload", None) or (lambda path: swap_local_engine(rollout, path))
        return GGUFExport(resolve_gguf(solver.model), reload, out_dir)
    if mode == "shared":
        return SharedModule(rollout)
    if mode == "copy":
        module = getattr(rollout, "model", rollout)
        if not isinstance(module, torch.nn.Module):
            raise ConfigError("trainer.weight_sync=copy needs the rollout engine's module (or its policy)")
        return CopyWeights(module)
    if mode == "vllm_server":
        if not (solver.base_url or solver.base_urls):
            raise ConfigError("trainer.weight_sync=vllm_server needs solver.base_url (the vLLM server)")
        if len(solver.base_urls) > 1:
            return VLLMServers(list(solver.base_urls), cfg.vllm_group_port, chat=rollout)
        return VLLMServer(solver.base_urls[0] if solver.base_urls else solver.base_url, cfg.vllm_group_port,
                          chat=rollout)
    if mode == "vllm_reload":
        from aes.train.vllm_reload import VLLMReload

        urls = list(solver.base_urls) or ([solver.base_url] if solver.base_url else [])
        if not urls:
            raise ConfigError("trainer.weight_sync=vllm_reload needs solver.base_url (the vLLM server)")
        return VLLMReload(urls, Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="aes-vllm-")),
                          chat=rollout, served_model=solver.model)
    if mode == "llamacpp_server":
        from aes.models.local import resolve_gguf

        if _SERVERS is None and os.environ.get("RANK", "0") == "0":
            raise ConfigError("trainer.weight_sync=llamacpp_server restarts the llama.cpp servers this job starts: "
                              "set cluster.servers > 0 and cluster.backend=llamacpp (e.g. cluster=llamacpp)")
        return GGUFExport(resolve_gguf(solver.model), restart_llamacpp_servers(rollout), out_dir)
    raise ConfigError(f"trainer.weight_sync={mode} is not a weight sync aes knows")
