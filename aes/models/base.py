"""The one model interface every proposer and solver backend implements.

Messages are OpenAI-style dicts: ``{"role": "system"|"user"|"assistant"|"tool",
"content": str}``; an assistant message may carry ``"tool_calls"`` (list of
:class:`ToolCall` as dicts) and a tool message a ``"tool_call_id"``. Backends convert
to their own wire format.
"""

from __future__ import annotations

import email.utils
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from aes.config import BudgetConfig, ModelConfig
from aes.errors import InfrastructureError

HEALTH_TIMEOUT_SEC = 10.0
"""Time a health check waits for a model server (connect and answer)."""


class ModelError(RuntimeError):
    """A model call failed for good (bad request, context too long, content filter, ...)."""


class ModelUnavailable(ModelError, InfrastructureError):
    """The model server or API cannot serve: connection refused or reset, DNS failure, timeouts,
    5xx / overloaded after the retries, a refused key, an unknown endpoint or model.

    Not the request's fault, so never a reward: an attempt that meets it is an infrastructure
    failure (``aes.errors``). The message names the server and what to start or set.
    """


class BudgetExhausted(ModelError):
    """The run's USD or token budget is spent; no new model calls are made."""


@dataclass
class ToolSpec:
    """A tool the model may call: name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass
class ToolCall:
    """One tool call requested by the model."""

    id: str
    name: str
    arguments: dict[str, Any]
    """Parsed arguments; ``{}`` with ``raw_arguments`` kept when they were not valid JSON."""
    raw_arguments: str = ""


@dataclass
class Usage:
    prompt_tokens: int = 0
    """Every token of the prompt, read from the provider's cache or not."""
    completion_tokens: int = 0
    """Every generated token, reasoning included (what the output price bills)."""
    cached_tokens: int = 0
    """Prompt tokens read from the provider's cache (part of ``prompt_tokens``)."""
    cache_write_tokens: int = 0
    """Prompt tokens written to the provider's cache (part of ``prompt_tokens``)."""
    reasoning_tokens: int = 0
    """Generated tokens spent reasoning (part of ``completion_tokens``), where the provider says."""

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def context(self) -> int:
        """Tokens of this call the conversation carries on: reasoning is not sent back."""
        return self.prompt_tokens + self.completion_tokens - self.reasoning_tokens


@dataclass
class ChatResult:
    """What one model call returned."""

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    """stop, length or tool_calls."""
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    reasoning_cost_usd: float = 0.0
    """The part of ``cost_usd`` paid for reasoning tokens."""
    model: str = ""
    latency_sec: float = 0.0
    prompt_token_ids: list[int] | None = None
    """The exact prompt tokens the engine consumed, where the backend can tell."""
    completion_token_ids: list[int] | None = None
    """The generated tokens, where the backend can tell."""
    completion_logprobs: list[float] | None = None
    """Log-prob of each generated token under the sampling engine (the DPPO behaviour policy)."""
    policy_version: int | None = None
    """Version of the weights that generated this (updates pushed to the engine), where known."""
    reasoning: str = ""
    """The model's reasoning as the provider shows it (a summary, or nothing where it is hidden)."""
    reasoning_blocks: list[dict[str, Any]] | None = None
    """The provider's reasoning items as they came (Anthropic's signed thinking blocks), to send back
    unchanged with this turn: an assistant message carries them under ``reasoning_blocks``."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ChatModel(Protocol):
    """A chat model. Implementations are thread-safe: rollouts call them concurrently."""

    config: ModelConfig
    supports_tools: bool
    """Whether ``tools=`` is honoured with native tool calls."""
    supports_token_ids: bool
    """Whether results carry prompt/completion token ids and log-probs."""

    def chat(self, messages: list[dict[str, Any]], tools: list[ToolSpec] | None = None, *,
             max_tokens: int | None = None, temperature: float | None = None,
             deadline: float | None = None) -> ChatResult:
        """One reply. ``deadline`` (``time.monotonic()`` seconds): where the engine can stop generating
        on time (llama.cpp), the reply ends at its first line break past it (``finish_reason``
        "length"); prompt evaluation is not bounded, and other engines do not cut the reply."""
        ...

    def health_check(self) -> None:
        """Raise :class:`ModelUnavailable` (naming the server and what to set) unless the model can serve."""
        ...

    def close(self) -> None: ...


def cost_usd(cfg: ModelConfig, usage: Usage) -> float:
    """Cost of a call from the config's pricing table (USD per million tokens): prompt tokens read
    from the cache at ``price_cached_input_per_mtok``, written to it at ``price_cache_write_per_mtok``
    (each the input price where unset), the rest at the input price; every generated token, reasoning
    included, at the output price."""
    read = cfg.price_input_per_mtok if cfg.price_cached_input_per_mtok is None else cfg.price_cached_input_per_mtok
    write = cfg.price_input_per_mtok if cfg.price_cache_write_per_mtok is None else cfg.price_cache_write_per_mtok
    fresh = usage.prompt_tokens - usage.cached_tokens - usage.cache_write_tokens
    return (fresh * cfg.price_input_per_mtok + usage.cached_tokens * read + usage.cache_write_tokens * write
            + usage.completion_tokens * cfg.price_output_per_mtok) / 1e6


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds a ``retry-after-ms`` / ``retry-after`` (seconds or HTTP date) header asks for."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        return max(0.0, email.utils.mktime_tz(parsed) - time.time())

def status_retry_delay(status: int, headers: Any) -> float | None:
    """Retry policy for an HTTP error status: seconds to wait (0: backoff) or None (do not retry)."""
    should = (headers.get("x-should-retry") if headers is not None else None) or ""
    if should.lower() == "false":  # the server says this failure is permanent
        return None
    if status == 429 or status == 408 or status >= 500:
        delay = retry_after_seconds(headers)
        # 0 would mean "exponential backoff" to BaseChatModel; a server asking for 0 s gets a tiny wait.
        return 0.0 if delay is None else max(delay, 1e-3)
    return None


UNAVAILABLE_STATUSES = frozenset({401, 403, 404, 408, 429})
"""Error statuses (besides 5xx) that no request could avoid: a refused key, an unknown endpoint or
model, a server too busy to answer. Every other 4xx (400, 413, 422, ...) is the request's fault."""


def status_unavailable(status: int) -> bool:
    """Whether an HTTP error status means the server cannot serve (not that the request was bad)."""
    return status >= 500 or status in UNAVAILABLE_STATUSES


def describe(exc: BaseException) -> str:
    """``exc`` with its root cause, e.g. ``Connection error. (ConnectError: [Errno 111] Connection refused)``:
    SDK connection errors say little on their own."""
    root, seen = exc, {id(exc)}
    while (cause := root.__cause__ or root.__context__) is not None and id(cause) not in seen:
        root = cause
        seen.add(id(root))
    text = str(exc) or type(exc).__name__
    if root is not exc and str(root) and str(root) not in text:
        text += f" ({type(root).__name__}: {root})"
    return text


def api_error_message(exc: Any) -> str:
    """The server's own message of an SDK error (nested ``{"error": {...}}`` or flat, as vLLM sends)."""
    msg = getattr(exc, "api_message", None)
    body = getattr(exc, "body", None)
    if not msg and isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else err
    return str(msg or getattr(exc, "message", None) or exc)


class RunBudget:
    """Run-level USD and token limits shared by every model of a run (thread-safe)."""

    def __init__(self, cfg: BudgetConfig | None = None):
        self.cfg = cfg or BudgetConfig()
        self.usd = 0.0
        self.tokens = 0
        self.calls = 0
        self.counts = {"reasoning_tokens": 0, "cached_tokens": 0, "cache_write_tokens": 0}
        """The run's tokens of each kind (parts of ``tokens``) beside the total."""
        self.reasoning_usd = 0.0
        self._lock = threading.Lock()

    def check(self) -> None:
        """Raise :class:`BudgetExhausted` if no further call may start."""
        with self._lock:
            if self.cfg.max_usd is not None and self.usd >= self.cfg.max_usd:
                raise BudgetExhausted(
                    f"run budget spent: ${self.usd:.4f} of budget.max_usd=${self.cfg.max_usd:g}; "
                    "raise budget.max_usd to continue")
            if self.cfg.max_tokens is not None and self.tokens >= self.cfg.max_tokens:
                raise BudgetExhausted(
                    f"run budget spent: {self.tokens} tokens of budget.max_tokens={self.cfg.max_tokens}; "
                    "raise budget.max_tokens to continue")

    def charge(self, result: ChatResult) -> None:
        with self._lock:
            self.usd += result.cost_usd
            self.tokens += result.usage.total
            self.calls += 1
            self.reasoning_usd += result.reasoning_cost_usd
            for kind in self.counts:
                self.counts[kind] += getattr(result.usage, kind)

    def summary(self) -> dict[str, float]:
        """The run's spending: ``cost_usd``, ``tokens`` and ``model_calls``, and the parts of them
        spent reasoning (``reasoning_tokens``, ``reasoning_cost_usd``) or read from / written to the
        providers' caches (``cached_tokens``, ``cache_write_tokens``)."""
        with self._lock:
            return {"cost_usd": self.usd, "tokens": self.tokens, "model_calls": self.calls,
                    "reasoning_cost_usd": self.reasoning_usd, **self.counts}


class BaseChatModel:
    """Shared behaviour of every backend: budget check, retries with backoff, cost, timing.

    Backends implement :meth:`_chat_once` (one attempt) and :meth:`_retryable`.
    """

    supports_tools = False
    supports_token_ids = False
    backoff_base_sec = 1.0
    backoff_max_sec = 60.0

    def __init__(self, cfg: ModelConfig, budget: RunBudget | None = None):
        self.config = cfg
        self.budget = budget or RunBudget()
        self._weights_version = 0
        self._call = threading.local()  # this thread's call: its deadline

    @property
    def weights_version(self) -> int:
        """How many weight updates the engine has received (trajectories record it per call)."""
        return self._weights_version

    def weights_updated(self) -> None:
        self._weights_version += 1

    def chat(self, messages: list[dict[str, Any]], tools: list[ToolSpec] | None = None, *,
             max_tokens: int | None = None, temperature: float | None = None,
             deadline: float | None = None) -> ChatResult:
        import random

        self.budget.check()
        self._call.deadline = deadline
        max_tokens = max_tokens or self.config.max_tokens
        temperature = self.config.temperature if temperature is None else temperature
        use_tools = tools if (tools and self.supports_tools and self.config.use_tools is not False) else None
        attempt = 0
        while True:
            start = time.monotonic()
            version = self.weights_version  # the weights this call is served by (engines that can swap
            try:                            # them under a call set result.policy_version themselves)
                result = self._chat_once(messages, use_tools, max_tokens, temperature)
                break
            except Exception as exc:  # classified below; non-retryable errors propagate
                delay = self._retryable(exc)
                if delay is None:
                    raise
                attempt += 1
                if attempt > self.config.max_retries:
                    # Retryable errors are the server's (connection, timeout, 5xx, overload), never the request's.
                    raise self.unavailable(
                        f"giving up after {self.config.max_retries} retries: {describe(exc)}") from exc
                if delay > 0:  # the server said how long: at least that, plus up to 25% jitter
                    wait = delay * (1.0 + 0.25 * random.random())
                else:
                    wait = (min(self.backoff_max_sec, self.backoff_base_sec * 2 ** (attempt - 1))
                            * (0.5 + random.random()))
                time.sleep(wait)
        result.latency_sec = time.monotonic() - start
        result.model = result.model or self.config.model
        if result.policy_version is None:
            result.policy_version = version
        result.cost_usd = cost_usd(self.config, result.usage)
        result.reasoning_cost_usd = result.usage.reasoning_tokens * self.config.price_output_per_mtok / 1e6
        self.budget.charge(result)
        return result

    def _chat_once(self, messages: list[dict[str, Any]], tools: list[ToolSpec] | None,
                   max_tokens: int, temperature: float) -> ChatResult:
        raise NotImplementedError

    def seconds_left(self) -> float | None:
        """Seconds until the current call's ``deadline`` (at least 0.001), None without one: for
        backends whose engine can stop a reply on time."""
        deadline = getattr(self._call, "deadline", None)
        return None if deadline is None else max(deadline - time.monotonic(), 0.001)

    def sends(self, setting: str) -> bool:
        """Whether a request may carry the parameter of config ``setting`` (``temperature``,
        ``parallel_tool_calls``, ...): not when the model's config lists it in ``unsupported_params``."""
        return setting not in self.config.unsupported_params

    def completion_limit(self, max_tokens: int) -> int:
        """The API's limit on generated tokens for a reply of ``max_tokens``: the model's
        ``reasoning_tokens`` come on top, as the APIs count reasoning in that limit."""
        return max_tokens + self.config.reasoning_tokens

    def _retryable(self, exc: Exception) -> float | None:
        """Seconds to wait before retrying ``exc`` (0: exponential backoff), None: do not retry."""
        return None

    def unavailable(self, problem: str) -> ModelUnavailable:
        """The error for a server that cannot serve: the model, ``problem`` and :meth:`unavailable_hint`."""
        return ModelUnavailable(f"{self.config.name}: {problem}; {self.unavailable_hint()}")

    def unavailable_hint(self) -> str:
        """Where the model is served and what to start or set when it cannot be reached (per backend)."""
        return f"the {self.config.backend} backend of model {self.config.model!r} cannot serve"

    def health_check(self) -> None:
        """Raise :class:`ModelUnavailable` unless the model can serve; run once before a run starts
        (default: nothing to check)."""

    def close(self) -> None:
        pass


def check_models(*models: ChatModel | None) -> None:
    """Health-check every model a mode uses (each one once); one :class:`ModelUnavailable` naming
    every failure. Called before any container starts: a server that is down stops the run there,
    with its address, instead of turning each attempt into a reward of 0."""
    failures: list[str] = []
    seen: set[int] = set()
    for model in models:
        if model is None or id(model) in seen:
            continue
        seen.add(id(model))
        check = getattr(model, "health_check", None)
        if check is None:  # a ChatModel from outside aes.models without the check
            continue
        try:
            check()
        except (ModelError, InfrastructureError) as exc:
            failures.append(str(exc))
    if len(failures) == 1:
        raise ModelUnavailable(failures[0])
    if failures:
        raise ModelUnavailable(f"{len(failures)} models cannot serve:\n" + "\n".join(f"  - {f}" for f in failures))
