"""Weight sync into running vLLM servers through an in-place reload (``trainer.weight_sync=vllm_reload``).

The path of vLLM servers on CPU (and of any server the trainer shares a file system with, where
NCCL is not available). vLLM 0.32's own endpoints (``VLLM_SERVER_DEV_MODE=1``) do the work; the
server is never restarted:

1. the trainer writes its weights as a safetensors checkpoint (Hugging Face names, the served
   model's dtype) under ``out_dir/policy-v<N>/``;
2. the chat client's calls in flight finish and new ones wait (:func:`aes.train.weights.new_weights`);
   every server is paused with ``POST /pause?mode=keep`` (requests of other clients, e.g. agents on
   Ray workers, are frozen where they are and go on with the new weights);
3. ``POST /collective_rpc {"method": "reload_weights", "kwargs": {"weights_path": DIR}}``: each
   worker loads the checkpoint into the model in place; ``POST /reset_prefix_cache``;
4. ``POST /update_weight_version`` with the new policy version (what ``GET /weight_info`` then says:
   clients on other machines read the version that serves them from there), ``POST /resume``.

One restriction of vLLM's in-place reload: a served model whose ``lm_head`` is tied to its
embeddings keeps its old ``lm_head`` (vLLM 0.32 reloads layer by layer and finds no ``lm_head``
tensor for it). Serve such models untied (:mod:`aes.models.export` writes its stand-ins so); the
sync refuses a tied local model with that advice.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import torch

from aes.config import ConfigError

log = logging.getLogger(__name__)

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ReloadError(RuntimeError):
    """A vLLM server did not take the new weights (its URL and answer in the message)."""


def call(root: str, path: str, body: Any = None, method: str = "POST", timeout: float = 600.0) -> Any:
    """One request to a vLLM server's root URL (no /v1); the parsed JSON answer (None when empty)."""
    data = json.dumps(body).encode() if body is not None else (b"{}" if method == "POST" else None)
    request = urllib.request.Request(root + path, data=data, method=method,
                                     headers={"content-type": "application/json"})
    try:
        with _NO_PROXY.open(request, timeout=timeout) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        detail = (exc.read() or b"").decode(errors="replace")[:1500]
        hint = " (start the server with VLLM_SERVER_DEV_MODE=1)" if exc.code == 404 else ""
        raise ReloadError(f"{method} {root}{path} answered {exc.code}{hint}: {detail}") from None
    except OSError as exc:
        raise ReloadError(f"{method} {root}{path} failed: {exc}") from None
    return json.loads(raw) if raw.strip() else None


def server_version(root: str, timeout: float = 10.0) -> int | None:
    """The policy version a server reports (``GET /weight_info``), None when it has none aes set."""
    try:
        answer = call(root, "/weight_info", method="GET", timeout=timeout)
    except ReloadError:
        return None
    try:
        return int((answer or {}).get("weight_version"))
    except (TypeError, ValueError):
        return None


def tied_locally(model: str) -> bool:
    """Whether a local model directory ties lm_head to its embeddings (None -> False: not local)."""
    config = Path(model) / "config.json"
    if not config.is_file():
        return False
    return bool(json.loads(config.read_text()).get("tie_word_embeddings", False))


class VLLMReload:
    """Pushes the trainer's weights into running vLLM servers by an in-place reload (module doc)."""

    def __init__(self, base_urls: list[str], out_dir: str | Path, chat: Any = None, keep: int = 1,
                 served_model: str | None = None):
        if served_model and tied_locally(served_model):
            raise ConfigError(f"{served_model} ties lm_head to its embeddings, which vLLM's in-place reload "
                              "(trainer.weight_sync=vllm_reload) leaves at the old weights: serve an untied copy "
                              "(aes.models.export.save_policy(..., untie=True)) or use weight_sync=vllm_server")
        self.roots = [u.rstrip("/").removesuffix("/v1") for u in base_urls]
        self.out_dir = Path(out_dir)
        self.chat = chat
        self.keep = max(1, keep)
        self.version = 0
        self.seconds: dict[str, float] = {}

    @torch.no_grad()
    def push(self, engine: Any) -> None:
        from aes.train.weights import _is_main, full_parameters, new_weights

        params = full_parameters(engine)
        if not _is_main():
            for _ in params:
                pass
            return
        start = time.perf_counter()
        path = self.write(params, engine)
        written = time.perf_counter()
        with new_weights(self.chat):
            version = (getattr(self.chat, "weights_version", self.version) or 0) + 1
            for root in self.roots:
                call(root, "/pause?mode=keep")
            try:
                for root in self.roots:
                    call(root, "/collective_rpc", {"method": "reload_weights",
                                                   "kwargs": {"weights_path": str(path.resolve())}})
                    call(root, "/reset_prefix_cache")
                    call(root, "/update_weight_version", {"new_version": str(version)})
            finally:
                for root in self.roots:
                    call(root, "/resume")
        self.version += 1
        self.seconds = {"write": written - start, "reload": time.perf_counter() - written}
        log.info("pushed policy v%d to %d vLLM server(s): checkpoint %.1f s, reload %.1f s", self.version,
                 len(self.roots), self.seconds["write"], self.seconds["reload"])
        for old in sorted(self.out_dir.glob("policy-v*"), key=lambda p: p.stat().st_mtime)[:-self.keep]:
            shutil.rmtree(old, ignore_errors=True)

    def write(self, params, engine: Any) -> Path:
        """The weights as a safetensors checkpoint in Hugging Face names (the model's own dtype)."""
        from safetensors.torch import save_file

        module = engine.module
        dtype = getattr(getattr(module, "config", None), "dtype", None)
        dtype = dtype if isinstance(dtype, torch.dtype) else None
        state = {}
        for name, tensor in params:
            t = tensor.detach().to("cpu")
            state[name.removeprefix("module.")] = (t.to(dtype) if dtype is not None else t).contiguous().clone()
        if "lm_head.weight" not in state and "model.embed_tokens.weight" in state:
            state["lm_head.weight"] = state["model.embed_tokens.weight"].clone()  # a tied trainer, an untied server
        path = self.out_dir / f"policy-v{self.version + 1}"
        path.mkdir(parents=True, exist_ok=True)
        save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
        return path

    def close(self) -> None:
        """The checkpoints are the servers' copy of the weights, rebuilt from the trainer's checkpoint
        on resume: none is left in the run dir."""
        for old in self.out_dir.glob("policy-v*"):
            shutil.rmtree(old, ignore_errors=True)


__all__ = ["ReloadError", "VLLMReload", "call", "server_version"]
