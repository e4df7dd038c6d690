"""Anthropic Messages API backend (``backend: anthropic``, ``conf/proposer/claude.yaml``).

Converts the OpenAI-style message list of :mod:`aes.models.base` to the Messages API:
system prompts go to the separate ``system`` parameter, assistant tool calls become
``tool_use`` blocks and tool results ``tool_result`` blocks of a user turn (consecutive
results share one turn); an assistant turn's signed thinking blocks (``reasoning_blocks``)
go back unchanged ahead of its text and calls, as the API requires with tool use. The SDK's
own retries are off; :class:`BaseChatModel` retries what :meth:`AnthropicChat._retryable`
classifies as transient.

What a request carries follows the model's config: ``max_tokens`` plus ``reasoning_tokens``
(thinking counts in the limit), ``thinking`` and ``reasoning_effort`` (``output_config.effort``),
``disable_parallel_tool_use`` unless ``parallel_tool_calls``, a top-level ``cache_control``
with ``prompt_cache``; a setting named in ``unsupported_params`` is never sent. The API version
the SDK speaks has no sampling parameters: no temperature is ever sent. Usage counts cache
reads and writes and thinking tokens apart.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any

import anthropic

from aes.config import ConfigError, ModelConfig
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

DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "refusal": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
}
EFFORTS = ("low", "medium", "high", "xhigh", "max")
"""The Messages API's ``output_config.effort`` values."""







def _tool_call_dict(call: Any) -> dict[str, Any]:
    """A tool call as ``{"id", "name", "arguments": dict}`` from our or OpenAI's layout."""
    if dataclasses.is_dataclass(call) and not isinstance(call, type):
        call = dataclasses.asdict(call)
    if "function" in call:  # OpenAI wire layout
        fn = call["function"]
        args = fn.get("arguments")
        name = fn.get("name", "")
    else:
        args = call.get("arguments")
        name = call.get("name", "")
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            args = {}
    if not isinstance(args, dict):
        args = {}
    return {"id": call.get("id", ""), "name": name, "arguments": args}


def _content_blocks(content: Any) -> list[dict[str, Any]]:
    """Text content (a string or OpenAI content parts) as Messages API text blocks."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks = []
    for part in content:
        if isinstance(part, str):
            text = part
        elif part.get("type") == "text":
            text = part.get("text", "")
        else:
            blocks.append(part)  # already a Messages API block (e.g. an image)
            continue
        if text:
            blocks.append({"type": "text", "text": text})
    return blocks


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p if isinstance(p, str) else p.get("text", "") for p in content)


def convert_messages(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """OpenAI-style messages as ``(system, messages)`` of the Messages API.

    Consecutive turns of one role (e.g. several tool results, or tool results followed
    by a user message) are merged into one turn, tool results first.
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": list(blocks)})

    for msg in messages:
        role = msg.get("role")
        if role in ("system", "developer"):
            text = _content_text(msg.get("content"))
            if text:
                system.append(text)
        elif role == "user":
            add("user", _content_blocks(msg.get("content")))
        elif role == "assistant":
            # signed thinking blocks first, exactly as they came
            blocks = [dict(b) for b in msg.get("reasoning_blocks") or []] + _content_blocks(msg.get("content"))
            for call in msg.get("tool_calls") or []:
                tc = _tool_call_dict(call)
                blocks.append({"type": "tool_use", "id": tc["id"], "name": tc["name"], "input": tc["arguments"]})
            add("assistant", blocks)
        elif role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": msg.get("tool_call_id", "")}
            text = _content_text(msg.get("content"))
            if text:
                block["content"] = text
            if msg.get("is_error"):
                block["is_error"] = True
            add("user", [block])
        else:
            raise ModelError(f"unknown message role {role!r}")
    # tool_result blocks must open their user turn.
    for turn in out:
        if turn["role"] == "user":
            turn["content"].sort(key=lambda b: b.get("type") != "tool_result")
    return "\n\n".join(system), out


def convert_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]


class AnthropicChat(BaseChatModel):
    """Claude through the official ``anthropic`` SDK."""

    supports_tools = True
    supports_token_ids = False

    def __init__(self, cfg: ModelConfig, budget: RunBudget | None = None):
        super().__init__(cfg, budget)
        self.key_env = cfg.api_key_env or DEFAULT_KEY_ENV
        key = os.environ.get(self.key_env, "").strip()
        if not key:
            raise self._missing_key()
        kwargs: dict[str, Any] = {"api_key": key, "max_retries": 0, "timeout": cfg.timeout_sec}
        if cfg.base_url:
            kwargs["base_url"] = cfg.base_url
        self._client = anthropic.Anthropic(**kwargs)
        if cfg.temperature != 1.0 and self.sends("temperature"):
            log.warning("model %r: the Anthropic Messages API takes no temperature; temperature=%g is ignored",
                        cfg.name, cfg.temperature)
        if cfg.reasoning_effort is not None and cfg.reasoning_effort not in EFFORTS:
            raise ConfigError(f"model {cfg.name!r} (backend anthropic): reasoning_effort must be one of "
                              f"{', '.join(EFFORTS)} or null, got {cfg.reasoning_effort!r}")

    @property
    def endpoint(self) -> str:
        """The API root requests go to (``base_url``, ``ANTHROPIC_BASE_URL`` or the SDK's default)."""
        return str(self._client.base_url).rstrip("/")

    def _missing_key(self) -> ModelUnavailable:
        return ModelUnavailable(
            f"model {self.config.name!r} (backend anthropic) needs an API key: set the environment "
            f"variable {self.key_env} (named by api_key_env)")

    def unavailable_hint(self) -> str:
        return (f"the Anthropic API at {self.endpoint} could not serve: check the network, the key in "
                f"{self.key_env} and https://status.anthropic.com (or base_url)")

    def health_check(self) -> None:
        """The key variable is set, and one models-list call (short timeout) reaches the API and
        is not refused for the key."""
        if not os.environ.get(self.key_env, "").strip():
            raise self._missing_key()
        client = self._client.with_options(timeout=min(HEALTH_TIMEOUT_SEC, self.config.timeout_sec), max_retries=0)
        try:
            client.models.list(limit=1)
        except anthropic.APIStatusError as exc:
            if exc.status_code in (401, 403):
                raise self.unavailable(f"{self.endpoint} refused the key in {self.key_env} ({exc.status_code}: "
                                       f"{api_error_message(exc)})") from exc
            if exc.status_code >= 500:
                raise self.unavailable(f"GET {self.endpoint}/v1/models answered {exc.status_code}: "
                                       f"{api_error_message(exc)}") from exc
            # Any other answer (e.g. a proxy without the models endpoint) shows the API is reachable.
        except anthropic.APIConnectionError as exc:  # refused, reset, DNS, timeout
            raise self.unavailable(f"cannot reach {self.endpoint}: {describe(exc)}") from exc

    def _chat_once(self, messages: list[dict[str, Any]], tools: list[ToolSpec] | None,
                   max_tokens: int, temperature: float) -> ChatResult:
        params = self.request_params(messages, tools, max_tokens)
        try:
            resp = self._client.messages.create(**params)
        except anthropic.APIStatusError as exc:
            if self._retryable(exc) is None:
                problem = (f"Anthropic API error {exc.status_code}"
                           f"{' (' + str(exc.type) + ')' if getattr(exc, 'type', None) else ''}: "
                           f"{api_error_message(exc)}")
                if status_unavailable(exc.status_code):
                    raise self.unavailable(problem) from exc
                raise ModelError(f"{self.config.name}: {problem}") from exc
            raise
        return self._parse(resp)

    def request_params(self, messages: list[dict[str, Any]], tools: list[ToolSpec] | None,
                       max_tokens: int) -> dict[str, Any]:
        """Keyword arguments of ``messages.create`` for one call.

        No sampling parameters: the API version the SDK sends (2026-10-21, SDK 2.x) rejects
        temperature/top_p/top_k with a 400, and the SDK's create() has no such arguments."""
        cfg = self.config
        system, turns = convert_messages(messages)
        params: dict[str, Any] = {"model": cfg.model, "messages": turns, "max_tokens": self.completion_limit(max_tokens)}
        if system:
            params["system"] = system
        if tools:
            params["tools"] = convert_tools(tools)
            if not cfg.parallel_tool_calls and self.sends("parallel_tool_calls"):
                params["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
        if cfg.thinking is not None and self.sends("thinking"):
            params["thinking"] = ({"type": "enabled", "budget_tokens": cfg.reasoning_tokens}
                                  if cfg.thinking == "enabled" else {"type": cfg.thinking})
        if cfg.reasoning_effort is not None and self.sends("reasoning_effort"):
            params["output_config"] = {"effort": cfg.reasoning_effort}
        if cfg.prompt_cache and self.sends("prompt_cache"):
            params["cache_control"] = {"type": "ephemeral"}  # the prompt up to its last block is cached
        return params

    @staticmethod
    def _parse(resp: Any) -> ChatResult:
        texts: list[str] = []
        calls: list[ToolCall] = []
        thoughts: list[str] = []
        signed: list[dict[str, Any]] = []
        for block in resp.content or []:
            kind = getattr(block, "type", None)
            if kind == "text":
                texts.append(block.text)
            elif kind == "thinking":
                thoughts.append(block.thinking)
                signed.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
            elif kind == "redacted_thinking":
                signed.append({"type": "redacted_thinking", "data": block.data})
            elif kind == "tool_use":
                args = block.input if isinstance(block.input, dict) else {}
                raw = "" if isinstance(block.input, dict) else json.dumps(block.input)
                calls.append(ToolCall(id=block.id, name=block.name, arguments=args, raw_arguments=raw))
        finish = _STOP_REASONS.get(resp.stop_reason or "", "stop")
        if calls and finish != "length":
            finish = "tool_calls"
        u = resp.usage
        cache_read = getattr(u, "cache_read_input_tokens", None) or 0
        cache_write = getattr(u, "cache_creation_input_tokens", None) or 0
        details = getattr(u, "output_tokens_details", None)
        usage = Usage(
            # input_tokens excludes the prompt tokens read from or written to the cache;
            # prompt_tokens counts the whole prompt.
            prompt_tokens=(u.input_tokens or 0) + cache_read + cache_write,
            completion_tokens=u.output_tokens or 0,  # thinking included (what is billed)
            cached_tokens=cache_read,
            cache_write_tokens=cache_write,
            reasoning_tokens=(getattr(details, "thinking_tokens", None) or 0) if details is not None else 0,
        )
        return ChatResult(text="".join(texts), tool_calls=calls, finish_reason=finish, usage=usage,
                          model=getattr(resp, "model", "") or "", reasoning="\n\n".join(thoughts),
                          reasoning_blocks=signed or None)

    def _retryable(self, exc: Exception) -> float | None:
        if isinstance(exc, anthropic.APIStatusError):
            return status_retry_delay(exc.status_code, exc.response.headers)
        if isinstance(exc, (anthropic.APITimeoutError, anthropic.APIConnectionError)):
            return 0.0
        return None

    def close(self) -> None:
        self._client.close()
