"""OpenAI chat-completions backend (``backend: openai`` and ``openai_compatible``).

``openai`` is the hosted API (``conf/proposer/gpt.yaml``); ``openai_compatible`` is any
server speaking the same protocol at ``base_url`` (vLLM, SGLang; ``conf/proposer/qwen.yaml``,
``conf/solver/qwen*.yaml``). With ``logprobs: true`` the per-token log-probs are requested,
and from an ``openai_compatible`` server also the token ids through vLLM's extensions:
``return_token_ids`` (response carries ``prompt_token_ids`` and each choice ``token_ids``)
and ``return_tokens_as_token_ids`` (log-prob tokens read ``token_id:<id>``, the fallback
for vLLM versions without ``return_token_ids``). Servers that do not know these fields
ignore them; the result then has no token ids.

llama.cpp's server (``engine: llamacpp``, learnt from the health check when ``engine: auto``; what
``cluster.backend=llamacpp`` starts) returns no prompt ids from its chat endpoint, and its chat
log-probs are those of the raw logits, not of the distribution it sampled from. So a call with
``logprobs: true`` is made the way :class:`aes.models.local.LocalChat` makes it in process, over
HTTP: the server renders the messages with the model's own chat template (``/apply-template``),
its tokenizer turns that into ``prompt_token_ids`` (``/tokenize``, special tokens parsed, BOS only
where the template lacks it), and those ids are sent to ``/v1/completions`` with every truncating
sampler off and ``n_probs: 1, post_sampling_probs: true``: each generated token comes back with its
id and its probability under ``softmax(logits / T)``, the distribution it was drawn from (mu). The
engine consumes exactly the ids sent (its prompt-token count is checked). Such a model has no
native tool calls: the agent uses fenced blocks.

Several servers of one model (``base_urls``) share the calls: a new episode goes to the server
with the fewest calls in flight, and its later turns to the server of its first turn (whose
prefix cache holds the history). :attr:`OpenAIChat.gate` lets a weight sync restart the servers
between calls: calls in flight finish first, new ones wait until the servers are back.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import logging
import math
import os
import random
import re
import threading
from typing import Any

import openai

from aes.config import ModelConfig
from aes.models.gate import WeightGate
from aes.models.base import (
    HEALTH_TIMEOUT_SEC,
    BaseChatModel,
    ChatResult,
    ModelError,
    ModelUnavailable,
    RunBudget,
    ToolCall,
    ToolSpec,
    Usage,
    api_error_message,
    describe,
    status_retry_delay,
    status_unavailable,
)

log = logging.getLogger(__name__)
for _name in ("httpx", "httpx2"):  # the SDK's transport logs every request at INFO: one line per model call
    if logging.getLogger(_name).level == logging.NOTSET:
        logging.getLogger(_name).setLevel(logging.WARNING)

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
DUMMY_KEY = "EMPTY"
"""Key sent to an ``openai_compatible`` server when none is configured (vLLM accepts any)."""

_FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "stop",
}
_TOKEN_ID = re.compile(r"^token_id:(\d+)$")
_MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")
_MIN_PROB = 1e-45
"""Floor of a sampled token's probability (a float32 from llama.cpp) before its log."""
_PROB_REDRAWS = 3
"""Extra draws of a llama.cpp completion for which the server left token probabilities out."""
_AFFINITY_KEYS = 4096
"""Episodes whose server is remembered (several base_urls)."""


def _affinity_key(messages: list[dict[str, Any]], reply: str | None = None) -> str | None:
    """The episode a conversation belongs to: its messages up to its first assistant turn (with
    ``reply`` as that turn when it has none yet); None for a first turn without a reply."""
    pairs = []
    for m in messages:
        pairs.append((m.get("role"), str(m.get("content") or "")))
        if m.get("role") == "assistant":
            break
    else:
        if reply is None:
            return None
        pairs.append(("assistant", reply))
    return hashlib.sha1(json.dumps(pairs).encode()).hexdigest()







def _wire_tool_call(call: Any) -> dict[str, Any]:
    """A tool call of an assistant message in the OpenAI wire layout."""
    if dataclasses.is_dataclass(call) and not isinstance(call, type):
        call = dataclasses.asdict(call)
    if "function" in call:
        fn = dict(call["function"])
        if not isinstance(fn.get("arguments"), str):
            fn["arguments"] = json.dumps(fn.get("arguments") or {})
        return {"id": call.get("id", ""), "type": "function", "function": fn}
    args = call.get("arguments")
    if isinstance(args, str):
        text = args
    else:
        # Parsed arguments are always sent as valid JSON: servers such as vLLM parse them
        # back for the chat template and reject the request otherwise.
        text = json.dumps(args or {})
    return {"id": call.get("id", ""), "type": "function", "function": {"name": call.get("name", ""), "arguments": text}}


def convert_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Our messages as chat-completions messages (tool calls in the wire layout, extra keys dropped)."""
    out = []
    for msg in messages:
        m = {k: msg[k] for k in _MESSAGE_KEYS if k in msg}
        if m.get("role") == "assistant":
            calls = [_wire_tool_call(c) for c in msg.get("tool_calls") or []]
            if calls:
                m["tool_calls"] = calls
                if not m.get("content"):
                    m["content"] = None
            else:
                m.pop("tool_calls", None)
        if m.get("role") == "tool" and m.get("content") is None:
            m["content"] = ""
        out.append(m)
    return out


def convert_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [{"type": "function",
             "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in tools]


def parse_arguments(raw: str | None) -> tuple[dict[str, Any], str]:
    """``(arguments, raw_arguments)``: raw is kept only when it is not a JSON object."""
    if raw is None or not raw.strip():
        return {}, ""
    try:
        args = json.loads(raw)
    except ValueError:
        return {}, raw
    if not isinstance(args, dict):
        return {}, raw
    return args, ""


class OpenAIChat(BaseChatModel):
    """OpenAI's API, or OpenAI-compatible servers, through the official ``openai`` SDK."""

    supports_token_ids = False

    def __init__(self, cfg: ModelConfig, budget: RunBudget | None = None):
        super().__init__(cfg, budget)
        self.compatible = cfg.backend == "openai_compatible"
        self.engine = cfg.engine if self.compatible else "openai"
        """vllm, llamacpp or auto (vLLM's request until the health check has seen the server)."""
        self.gate = WeightGate()
        self._lock = threading.Lock()
        self._llama: dict[int, dict[str, Any]] = {}
        self._rng = random.Random(cfg.seed) if cfg.seed is not None else random.SystemRandom()
        self.key_env = cfg.api_key_env or (None if self.compatible else DEFAULT_KEY_ENV)
        key = os.environ.get(self.key_env, "").strip() if self.key_env else ""
        if not key:
            if not self.compatible:
                raise self._missing_key()
            key = DUMMY_KEY
        urls = [u for u in (cfg.base_urls if self.compatible else []) if u] or ([cfg.base_url] if cfg.base_url else [])
        if self.compatible and not (urls or os.environ.get("OPENAI_BASE_URL")):
            raise ModelError(f"model {cfg.name!r} (backend openai_compatible) needs base_url, "
                             "e.g. http://localhost:8000/v1")
        # Token ids and log-probs come from the engine that sampled: only a server we run can give them.
        self.supports_token_ids = bool(self.compatible and cfg.logprobs)
        kwargs: dict[str, Any] = {"api_key": key, "max_retries": 0, "timeout": cfg.timeout_sec}
        self._clients = [openai.OpenAI(**kwargs, base_url=u) for u in urls] or [openai.OpenAI(**kwargs)]
        self._client = self._clients[0]
        self._in_flight = [0] * len(self._clients)
        """Calls in flight per server (several base_urls)."""
        self.calls_per_server = [0] * len(self._clients)
        """Calls each server has served."""
        self._next = 0
        self._affinity: collections.OrderedDict[str, int] = collections.OrderedDict()
        self.server_versions = False
        """Read the policy version from the vLLM server before each call (``GET /weight_info``, set by
        the trainer's ``vllm_reload`` push): a client in another process than the trainer's (an agent on
        a Ray worker) then records the version that serves it, not the one it was built with."""

    @property
    def weights_version(self) -> int:  # type: ignore[override]
        if self.server_versions:
            served = self.served_version()
            if served is not None:
                return max(served, self._weights_version)
        return self._weights_version

    def served_version(self) -> int | None:
        """The policy version the (first) vLLM server reports, None when it reports none."""
        import urllib.error
        import urllib.request

        root = self.endpoint.removesuffix("/v1")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(root + "/weight_info", timeout=HEALTH_TIMEOUT_SEC) as response:
                value = json.loads(response.read()).get("weight_version")
        except (OSError, ValueError, AttributeError):
            return None
        try:
            return int(value)
        except (TypeError, ValueError):
            return None

    @property
    def endpoint(self) -> str:
        """The API root requests go to (``base_url``, ``OPENAI_BASE_URL`` or the SDK's default); the
        first one of several."""
        return str(self._client.base_url).rstrip("/")

    @property
    def endpoints(self) -> list[str]:
        """Every server's API root."""
        return [str(c.base_url).rstrip("/") for c in self._clients]

    @property
    def supports_tools(self) -> bool:  # type: ignore[override]
        """llama.cpp's exact-ids path renders the chat template without tools: fenced blocks instead."""
        return not (self.engine == "llamacpp" and self.config.logprobs)

    def _missing_key(self) -> ModelUnavailable:
        return ModelUnavailable(
            f"model {self.config.name!r} (backend {self.config.backend}) needs an API key: set the environment "
            f"variable {self.key_env} (named by api_key_env)")

    def unavailable_hint(self) -> str:
        if self.compatible:
            return (f"is a model server serving {self.config.model} at {', '.join(self.endpoints)}? Start one (e.g. "
                    f"`vllm serve {self.config.model}`, see launchers/) or point solver.base_url / "
                    "proposer.base_url at it")
        return (f"the OpenAI API at {self.endpoint} could not serve: check the network, the key in "
                f"{self.key_env} and https://status.openai.com (or base_url)")

    def health_check(self) -> None:
        """One ``GET {base_url}/models`` with a short timeout: the server answers and takes the key.

        A hosted API also needs its key variable set. An ``openai_compatible`` server that does
        not list ``model`` is reported in the log, not refused (SGLang serves any name).
        """
        if not self.compatible and not os.environ.get(self.key_env or "", "").strip():
            raise self._missing_key()
        for client in self._clients:
            self._check_server(client)

    def _check_server(self, client: openai.OpenAI) -> None:
        endpoint = str(client.base_url).rstrip("/")
        client = client.with_options(timeout=min(HEALTH_TIMEOUT_SEC, self.config.timeout_sec), max_retries=0)
        try:
            models = client.models.list().data
            served = [m.id for m in models]
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403):
                which = (f"the key in {self.key_env}" if self.key_env
                         else "no key: set api_key_env to a variable holding the server's key")
                raise self.unavailable(f"{endpoint} refused the API key ({exc.status_code}: "
                                       f"{api_error_message(exc)}; sent {which})") from exc
            if self.compatible or exc.status_code >= 500:
                raise self.unavailable(f"GET {endpoint}/models answered {exc.status_code}: "
                                       f"{api_error_message(exc)}") from exc
            return  # a hosted API (or proxy) that answered, if not with a model list, is reachable
        except openai.APIConnectionError as exc:  # refused, reset, DNS, timeout
            raise self.unavailable(f"cannot reach {endpoint}/models: {describe(exc)}") from exc
        if self.compatible and self.engine == "auto":
            self.engine = "llamacpp" if any(getattr(m, "owned_by", "") == "llamacpp" for m in models) else "vllm"
        if self.compatible and served and self.config.model not in served:
            log.warning("model %r: the server at %s serves %s, not model=%s; requests may be refused",
                        self.config.name, endpoint, ", ".join(served), self.config.model)

    def request_params(self, messages: list[dict[str, Any]], tools: list[ToolSpec] | None,
                       max_tokens: int, temperature: float) -> dict[str, Any]:
        """Keyword arguments of ``chat.completions.create`` for one call.

        The completion limit is ``max_tokens`` plus the model's ``reasoning_tokens`` (reasoning counts
        in it); ``parallel_tool_calls: false`` goes with tools unless the config allows parallel calls;
        ``reasoning_effort`` where configured. A setting named in ``unsupported_params`` (e.g. the
        temperature, which OpenAI's reasoning models reject) is never sent."""
        cfg = self.config
        params: dict[str, Any] = {"model": cfg.model, "messages": convert_messages(messages)}
        if self.sends("temperature"):
            params["temperature"] = temperature
        if self.compatible:
            params["max_tokens"] = self.completion_limit(max_tokens)
        else:
            # The hosted API rejects max_tokens for reasoning models (o-series, gpt-5).
            params["max_completion_tokens"] = self.completion_limit(max_tokens)
        if tools:
            params["tools"] = convert_tools(tools)
            if not cfg.parallel_tool_calls and self.sends("parallel_tool_calls"):
                params["parallel_tool_calls"] = False
        if cfg.reasoning_effort is not None and self.sends("reasoning_effort"):
            params["reasoning_effort"] = cfg.reasoning_effort
        if self.config.seed is not None and self.sends("seed"):
            params["seed"] = self.config.seed
        if self.config.logprobs and self.sends("logprobs"):
            params["logprobs"] = True
            if self.compatible:
                params["extra_body"] = {"return_token_ids": True, "return_tokens_as_token_ids": True}
        return params

    # -- several servers ----------------------------------------------------------------
    def _pick(self, messages: list[dict[str, Any]]) -> int:
        """The server for a call: the one of the episode's first turn, else the least busy."""
        n = len(self._clients)
        if n == 1:
            return 0
        key = _affinity_key(messages)
        with self._lock:
            if key is not None and key in self._affinity:
                self._affinity.move_to_end(key)
                return self._affinity[key]
            start, self._next = self._next, (self._next + 1) % n
            return min(range(n), key=lambda i: (self._in_flight[i], (i - start) % n))

    def _remember(self, index: int, messages: list[dict[str, Any]], result: ChatResult) -> None:
        if len(self._clients) == 1 or any(m.get("role") == "assistant" for m in messages):
            return
        key = _affinity_key(messages, result.text or "")
        with self._lock:
            self._affinity[key] = index
            while len(self._affinity) > _AFFINITY_KEYS:
                self._affinity.popitem(last=False)

    def _chat_once(self, messages: list[dict[str, Any]], tools: list[ToolSpec] | None,
                   max_tokens: int, temperature: float) -> ChatResult:
        index = self._pick(messages)
        with self.gate.call():
            with self._lock:
                self._in_flight[index] += 1
            try:
                if self.engine == "llamacpp" and self.config.logprobs:
                    result = self._llamacpp_chat(index, messages, max_tokens, temperature)
                else:
                    result = self._chat_completion(self._clients[index], messages, tools, max_tokens, temperature)
            finally:
                with self._lock:
                    self._in_flight[index] -= 1
            with self._lock:
                self.calls_per_server[index] += 1
            result.policy_version = getattr(self, "weights_version", None)
        self._remember(index, messages, result)
        return result

    def _status_error(self, exc: openai.APIStatusError) -> Exception:
        """A status the retries do not cover: the server's fault (unavailable) or the request's."""
        problem = (f"{'server' if self.compatible else 'OpenAI API'} error "
                   f"{exc.status_code}: {api_error_message(exc)}")
        if status_unavailable(exc.status_code):
            return self.unavailable(problem)
        return ModelError(f"{self.config.name}: {problem}")

    def _chat_completion(self, client: openai.OpenAI, messages: list[dict[str, Any]], tools: list[ToolSpec] | None,
                         max_tokens: int, temperature: float) -> ChatResult:
        params = self.request_params(messages, tools, max_tokens, temperature)
        try:
            resp = client.chat.completions.create(**params)
        except openai.APIStatusError as exc:
            if self._retryable(exc) is None:
                raise self._status_error(exc) from exc
            raise
        return self._parse(resp)

    # -- llama.cpp: exact ids and mu over HTTP ------------------------------------------
    def _llama_post(self, index: int, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST to a llama.cpp server's root (``/tokenize``) or API (``/v1/...``); errors as the SDK's."""
        client = self._clients[index]
        root = str(client.base_url).rstrip("/").removesuffix("/v1")
        url = path.removeprefix("/v1") if path.startswith("/v1/") else root + path  # API paths: relative to base_url
        try:
            out = client.post(url, cast_to=object, body=body)
        except openai.APIStatusError as exc:
            if self._retryable(exc) is None:
                raise self._status_error(exc) from exc
            raise
        if not isinstance(out, dict):
            raise ModelError(f"{self.config.name}: {path} answered {str(out)[:300]!r}")
        return out

    def _llama_info(self, index: int) -> dict[str, Any]:
        """What the llama.cpp server says about its model (BOS token, vocabulary size), once per server."""
        with self._lock:
            info = self._llama.get(index)
        if info is not None:
            return info
        client = self._clients[index]
        root = str(client.base_url).rstrip("/").removesuffix("/v1")
        try:
            props = client.get(root + "/props", cast_to=object)
            models = client.get("/models", cast_to=object)
        except openai.APIStatusError as exc:
            if self._retryable(exc) is None:
                raise self._status_error(exc) from exc
            raise
        meta = ((models.get("data") or [{}])[0].get("meta") or {}) if isinstance(models, dict) else {}
        info = {"bos": (props or {}).get("bos_token") or "", "n_vocab": int(meta.get("n_vocab") or 0)}
        if not info["n_vocab"]:
            raise self.unavailable(f"{root}/v1/models reports no vocabulary size: is it a llama.cpp server?")
        with self._lock:
            self._llama[index] = info
        return info

    def _llamacpp_chat(self, index: int, messages: list[dict[str, Any]], max_tokens: int,
                       temperature: float) -> ChatResult:
        from aes.models.local import chat_messages, time_limit

        info = self._llama_info(index)
        prompt = self._llama_post(index, "/apply-template", {"messages": chat_messages(messages)})["prompt"]
        add_special = not (info["bos"] and prompt.startswith(info["bos"]))
        prompt_ids = [int(t) for t in self._llama_post(
            index, "/tokenize", {"content": prompt, "add_special": add_special, "parse_special": True})["tokens"]]
        room = self.config.context_length - len(prompt_ids)
        if room <= 0:
            raise ModelError(f"{self.config.name}: prompt of {len(prompt_ids)} tokens leaves no room in "
                             f"context_length={self.config.context_length}")
        for draw in range(_PROB_REDRAWS + 1):
            with self._lock:
                seed = self._rng.randrange(0, 2**32 - 1)  # 2**32-1 means "random" to llama.cpp
            out = self._llama_post(index, "/v1/completions", {
                "model": self.config.model, "prompt": prompt_ids, "max_tokens": int(min(max_tokens, room)),
                "temperature": float(temperature), "seed": seed, "stream": False, "cache_prompt": True,
                # every truncating sampler off: the token is drawn from softmax(logits / T) ...
                "top_k": info["n_vocab"], "top_p": 1.0, "min_p": 0.0, "typical_p": 1.0, "top_n_sigma": -1.0,
                "xtc_probability": 0.0, "dynatemp_range": 0.0, "mirostat": 0, "repeat_penalty": 1.0,
                "presence_penalty": 0.0, "frequency_penalty": 0.0, "dry_multiplier": 0.0,
                # ... and reported with its probability under that distribution (mu)
                "n_probs": 1, "post_sampling_probs": True, **time_limit(self.seconds_left())})
            choice = (out.get("choices") or [{}])[0]
            usage = out.get("usage") or {}
            content = (choice.get("logprobs") or {}).get("content") or []
            n_gen = int(usage.get("completion_tokens", len(content)))
            if len(content) == n_gen:
                break
            # a token that ends inside a UTF-8 character comes without id and probability (see
            # aes.models.local): the turn could not be trained on, so it is drawn again
            if draw == _PROB_REDRAWS:
                raise ModelError(f"{self.config.name}: the server returned {len(content)} token probabilities for "
                                 f"{n_gen} generated tokens in each of {_PROB_REDRAWS + 1} draws")
        if int(usage.get("prompt_tokens", len(prompt_ids))) != len(prompt_ids):
            raise ModelError(f"{self.config.name}: the server consumed {usage.get('prompt_tokens')} prompt tokens, "
                             f"{len(prompt_ids)} were sent")
        ids = [int(t["id"]) for t in content]
        logprobs = [math.log(max(float(t["prob"]), _MIN_PROB)) if temperature > 0 else 0.0 for t in content]
        cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        return ChatResult(text=choice.get("text") or "",
                          finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
                          usage=Usage(prompt_tokens=len(prompt_ids), completion_tokens=len(ids), cached_tokens=cached),
                          model=out.get("model") or self.config.model, prompt_token_ids=prompt_ids,
                          completion_token_ids=ids, completion_logprobs=logprobs)

    def _parse(self, resp: Any) -> ChatResult:
        if not resp.choices:
            raise ModelError(f"{self.config.name}: response has no choices")
        choice = resp.choices[0]
        msg = choice.message
        calls = []
        for tc in msg.tool_calls or []:
            fn = getattr(tc, "function", None)
            if fn is None:  # custom (non-function) tool calls are not part of our interface
                continue
            args, raw = parse_arguments(fn.arguments)
            calls.append(ToolCall(id=tc.id, name=fn.name, arguments=args, raw_arguments=raw))
        finish = _FINISH_REASONS.get(choice.finish_reason or "", "stop")
        if calls and finish != "length":
            finish = "tool_calls"

        usage = Usage()
        if resp.usage is not None:
            prompt = getattr(resp.usage, "prompt_tokens_details", None)
            completion = getattr(resp.usage, "completion_tokens_details", None)
            usage = Usage(prompt_tokens=resp.usage.prompt_tokens or 0,
                          completion_tokens=resp.usage.completion_tokens or 0,  # reasoning included
                          cached_tokens=getattr(prompt, "cached_tokens", None) or 0,
                          cache_write_tokens=getattr(prompt, "cache_write_tokens", None) or 0,
                          reasoning_tokens=getattr(completion, "reasoning_tokens", None) or 0)

        # vLLM's reasoning parsers return the thinking apart (``reasoning``; ``reasoning_content`` before)
        reasoning = getattr(msg, "reasoning", None) or getattr(msg, "reasoning_content", None)
        result = ChatResult(text=msg.content or "", tool_calls=calls, finish_reason=finish, usage=usage,
                            model=resp.model or "", reasoning=reasoning if isinstance(reasoning, str) else "")
        content = choice.logprobs.content if choice.logprobs is not None else None
        if self.config.logprobs and content:
            result.completion_logprobs = [float(t.logprob) for t in content]
        if self.supports_token_ids:
            prompt_ids = getattr(resp, "prompt_token_ids", None)
            if prompt_ids is not None:
                result.prompt_token_ids = [int(t) for t in prompt_ids]
            token_ids = getattr(choice, "token_ids", None)
            if token_ids is not None:
                result.completion_token_ids = [int(t) for t in token_ids]
            elif content:
                ids = [_TOKEN_ID.match(t.token or "") for t in content]
                if all(ids):
                    result.completion_token_ids = [int(m.group(1)) for m in ids]
        return result

    def _retryable(self, exc: Exception) -> float | None:
        if isinstance(exc, openai.APIStatusError):
            return status_retry_delay(exc.status_code, exc.response.headers)
        if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
            return 0.0
        return None

    def close(self) -> None:
        for client in self._clients:
            client.close()
