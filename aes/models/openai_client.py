"""OpenAI chat-completions backend (``backend: openai`` and ``openai_compatible``).

``openai`` is the hosted API (``conf/proposer/gpt.yaml``); ``openai_compatible`` is any
server speaking the same protocol at ``base_url`` (vLLM, SGLang; ``conf/proposer/qwen.yaml``,
``conf/solver/qwen*.yaml``). With ``logprobs: true`` the per-token log-probs are requested,
and from an ``openai_compatible`` server also the token ids through vLLM's extensions:
``return_token_ids`` (response carries ``prompt_token_ids`` and each choice ``token_ids``)
and ``return_tokens_as_token_ids`` (log-prob tokens read ``token_id:<id>``, the fallback
for vLLM versions without ``return_token_ids``). Servers that do not know these fields
ignore them; the result then has no token ids.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from typing import Any

import openai

from aes.config import ModelConfig
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
    """OpenAI's API, or an OpenAI-compatible server, through the official ``openai`` SDK."""

    supports_tools = True
    supports_token_ids = False

    def __init__(self, cfg: ModelConfig, budget: RunBudget | None = None):
        super().__init__(cfg, budget)
        self.compatible = cfg.backend == "openai_compatible"
        self.key_env = cfg.api_key_env or (None if self.compatible else DEFAULT_KEY_ENV)
        key = os.environ.get(self.key_env, "").strip() if self.key_env else ""
        if not key:
            if not self.compatible:
                raise self._missing_key()
            key = DUMMY_KEY
        if self.compatible and not (cfg.base_url or os.environ.get("OPENAI_BASE_URL")):
            raise ModelError(f"model {cfg.name!r} (backend openai_compatible) needs base_url, "
                             "e.g. http://localhost:8000/v1")
        # Token ids and log-probs come from the engine that sampled: only a server we run can give them.
        self.supports_token_ids = bool(self.compatible and cfg.logprobs)
        kwargs: dict[str, Any] = {"api_key": key, "max_retries": 0, "timeout": cfg.timeout_sec}
        if cfg.base_url:
            kwargs["base_url"] = cfg.base_url
        self._client = openai.OpenAI(**kwargs)

    @property
    def endpoint(self) -> str:
        """The API root requests go to (``base_url``, ``OPENAI_BASE_URL`` or the SDK's default)."""
        return str(self._client.base_url).rstrip("/")

    def _missing_key(self) -> ModelUnavailable:
        return ModelUnavailable(
            f"model {self.config.name!r} (backend {self.config.backend}) needs an API key: set the environment "
            f"variable {self.key_env} (named by api_key_env)")

    def unavailable_hint(self) -> str:
        if self.compatible:
            return (f"is a model server serving {self.config.model} at {self.endpoint}? Start one (e.g. "
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
        client = self._client.with_options(timeout=min(HEALTH_TIMEOUT_SEC, self.config.timeout_sec), max_retries=0)
        try:
            served = [m.id for m in client.models.list().data]
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403):
                which = (f"the key in {self.key_env}" if self.key_env
                         else "no key: set api_key_env to a variable holding the server's key")
                raise self.unavailable(f"{self.endpoint} refused the API key ({exc.status_code}: "
                                       f"{api_error_message(exc)}; sent {which})") from exc
            if self.compatible or exc.status_code >= 500:
                raise self.unavailable(f"GET {self.endpoint}/models answered {exc.status_code}: "
                                       f"{api_error_message(exc)}") from exc
            return  # a hosted API (or proxy) that answered, if not with a model list, is reachable
        except openai.APIConnectionError as exc:  # refused, reset, DNS, timeout
            raise self.unavailable(f"cannot reach {self.endpoint}/models: {describe(exc)}") from exc
        if self.compatible and served and self.config.model not in served:
            log.warning("model %r: the server at %s serves %s, not model=%s; requests may be refused",
                        self.config.name, self.endpoint, ", ".join(served), self.config.model)

    def request_params(self, messages: list[dict[str, Any]], tools: list[ToolSpec] | None,
                       max_tokens: int, temperature: float) -> dict[str, Any]:
        """Keyword arguments of ``chat.completions.create`` for one call."""
        params: dict[str, Any] = {
            "model": self.config.model,
            "messages": convert_messages(messages),
            "temperature": temperature,
        }
        if self.compatible:
            params["max_tokens"] = max_tokens
        else:
            # The hosted API rejects max_tokens for reasoning models (o-series, gpt-5).
            params["max_completion_tokens"] = max_tokens
        if tools:
            params["tools"] = convert_tools(tools)
        if self.config.seed is not None:
            params["seed"] = self.config.seed
        if self.config.logprobs:
            params["logprobs"] = True
            if self.compatible:
                params["extra_body"] = {"return_token_ids": True, "return_tokens_as_token_ids": True}
        return params

    def _chat_once(self, messages: list[dict[str, Any]], tools: list[ToolSpec] | None,
                   max_tokens: int, temperature: float) -> ChatResult:
        params = self.request_params(messages, tools, max_tokens, temperature)
        try:
            resp = self._client.chat.completions.create(**params)
        except openai.APIStatusError as exc:
            if self._retryable(exc) is None:
                problem = (f"{'server' if self.compatible else 'OpenAI API'} error "
                           f"{exc.status_code}: {api_error_message(exc)}")
                if status_unavailable(exc.status_code):
                    raise self.unavailable(problem) from exc
                raise ModelError(f"{self.config.name}: {problem}") from exc
            raise
        return self._parse(resp)

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
            details = getattr(resp.usage, "prompt_tokens_details", None)
            usage = Usage(prompt_tokens=resp.usage.prompt_tokens or 0,
                          completion_tokens=resp.usage.completion_tokens or 0,
                          cached_tokens=(getattr(details, "cached_tokens", None) or 0) if details else 0)

        result = ChatResult(text=msg.content or "", tool_calls=calls, finish_reason=finish, usage=usage,
                            model=resp.model or "")
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
        self._client.close()
