"""Hosted / server model backends against a local HTTP server replaying recorded responses.

``tests/fixtures/model_responses/*.json`` hold one response each: ``status``, ``headers``
and ``body`` as the real API sends them (Anthropic Messages, OpenAI chat.completions,
vLLM's OpenAI server); the server is :mod:`tests.replay`. No network and no Docker; the
whole file runs in a few seconds.
A server that cannot serve (refused connection, 5xx after the retries, a refused key) must
raise ``ModelUnavailable`` naming its address; the request's own errors stay ``ModelError``.
"""

from __future__ import annotations

import json
import random
import socket
import time
from typing import Any

import pytest

from aes.config import BudgetConfig, ModelConfig
from aes.errors import InfrastructureError
from aes.models import (
    BudgetExhausted,
    ModelError,
    ModelUnavailable,
    RunBudget,
    ToolCall,
    ToolSpec,
    build_model,
    check_models,
)
from tests.replay import ReplayServer, offline, recorded, replay_server

anthropic_client = pytest.importorskip("aes.models.anthropic_client")
openai_client = pytest.importorskip("aes.models.openai_client")
AnthropicChat = anthropic_client.AnthropicChat
OpenAIChat = openai_client.OpenAIChat

KEY_ENV = "AES_TEST_MODEL_KEY"


@pytest.fixture
def server():
    with replay_server() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    offline(monkeypatch, KEY_ENV)


@pytest.fixture
def sleeps(monkeypatch):
    """Record BaseChatModel's backoff waits instead of sleeping; jitter factor fixed at 1."""
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)
    monkeypatch.setattr(random, "random", lambda: 0.5)
    return waits


def claude(server: ReplayServer, **kw: Any) -> ModelConfig:
    base = dict(name="claude", backend="anthropic", model="claude-sonnet-4-6", base_url=server.url,
                api_key_env=KEY_ENV, temperature=1.0, max_tokens=4096, price_input_per_mtok=3.0,
                price_output_per_mtok=15.0, timeout_sec=5.0, max_retries=3)
    return ModelConfig(**{**base, **kw})


def gpt(server: ReplayServer, **kw: Any) -> ModelConfig:
    base = dict(name="gpt", backend="openai", model="gpt-5", base_url=server.url + "/v1",
                api_key_env=KEY_ENV, temperature=1.0, max_tokens=16384, price_input_per_mtok=1.25,
                price_output_per_mtok=10.0, timeout_sec=5.0, max_retries=3)
    return ModelConfig(**{**base, **kw})


def qwen(server: ReplayServer, **kw: Any) -> ModelConfig:
    base = dict(name="qwen", backend="openai_compatible", model="Qwen/Qwen3-8B",
                base_url=server.url + "/v1", temperature=1.0, max_tokens=8192, logprobs=True,
                timeout_sec=5.0, max_retries=3)
    return ModelConfig(**{**base, **kw})


def fast(model):
    model.backoff_base_sec = 0.001
    return model


BASH = ToolSpec(name="bash", description="Run a shell command in /app.",
                parameters={"type": "object", "properties": {"command": {"type": "string"}},
                            "required": ["command"]})

CONVERSATION = [
    {"role": "system", "content": "You are a terminal agent."},
    {"role": "user", "content": "Fix the failing test in /app."},
    {"role": "assistant", "content": "Two checks first.",
     "tool_calls": [ToolCall(id="toolu_1", name="bash", arguments={"command": "ls"}).__dict__,
                    ToolCall(id="toolu_2", name="bash", arguments={"command": "cat log"}).__dict__]},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "src tests"},
    {"role": "tool", "tool_call_id": "toolu_2", "content": "AssertionError"},
    {"role": "user", "content": "Keep going."},
]


# ---------------------------------------------------------------- Anthropic


def test_anthropic_request_conversion_and_parsed_result(server):
    server.push("anthropic_tool_use")
    budget = RunBudget()
    model = AnthropicChat(claude(server), budget)
    result = model.chat(CONVERSATION, tools=[BASH], max_tokens=1024)

    (req,) = server.requests
    assert req["path"] == "/v1/messages"
    assert req["headers"]["authorization"] == "Bearer sk-test-123"  # SDK 2.x sends the key as a bearer token
    assert req["headers"]["anthropic-version"]
    body = req["body"]
    assert body["model"] == "claude-sonnet-4-6"
    assert body["max_tokens"] == 1024
    assert "temperature" not in body  # the API version the SDK speaks rejects sampling parameters
    assert body["system"] == "You are a terminal agent."
    assert body["tools"] == [{"name": "bash", "description": "Run a shell command in /app.",
                              "input_schema": BASH.parameters}]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Fix the failing test in /app."}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Two checks first."},
            {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}},
            {"type": "tool_use", "id": "toolu_2", "name": "bash", "input": {"command": "cat log"}}]},
        # both tool results and the following user text share one user turn, results first
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "src tests"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "AssertionError"},
            {"type": "text", "text": "Keep going."}]},
    ]

    assert result.text == "The test log points at the parser. Let me run the failing test first."
    assert result.tool_calls == [ToolCall(
        id="toolu_01D7FLrfh4GYq7yT1ULFeyMV", name="bash",
        arguments={"command": "cd /app && python -m pytest tests/test_parse.py -x -q", "timeout_sec": 120})]
    assert result.finish_reason == "tool_calls"
    assert result.model == "claude-sonnet-4-6"
    # input_tokens excludes cache reads; prompt_tokens is the whole prompt
    assert (result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.cached_tokens) == (
        1523 + 2048, 87, 2048)
    assert result.cost_usd == pytest.approx((3571 * 3.0 + 87 * 15.0) / 1e6)
    assert budget.summary() == {"cost_usd": pytest.approx(result.cost_usd), "tokens": 3571 + 87,
                                "model_calls": 1, "reasoning_tokens": 0, "reasoning_cost_usd": 0.0,
                                "cached_tokens": 2048, "cache_write_tokens": 0}
    assert result.prompt_token_ids is None and not model.supports_token_ids
    model.close()


def test_anthropic_max_tokens_is_length_and_no_tools_sent_when_disabled(server):
    server.push("anthropic_max_tokens")
    model = AnthropicChat(claude(server, use_tools=False))
    result = model.chat([{"role": "user", "content": "Write a task."}], tools=[BASH])
    assert result.finish_reason == "length"
    assert result.text.startswith("# Task: repair the gradebook")
    body = server.bodies[0]
    assert "tools" not in body and "system" not in body
    assert body["max_tokens"] == 4096  # from the config


def test_anthropic_429_honours_retry_after(server, sleeps):
    server.push("anthropic_rate_limit_429", "anthropic_tool_use")
    result = AnthropicChat(claude(server)).chat([{"role": "user", "content": "hi"}])
    assert result.finish_reason == "tool_calls"
    assert len(server.requests) == 2
    assert len(sleeps) == 1 and 2.0 <= sleeps[0] <= 2.5  # the retry-after header, not the backoff


def test_anthropic_529_overloaded_then_success(server, sleeps):
    server.push("anthropic_overloaded_529", "anthropic_overloaded_529", "anthropic_tool_use")
    model = fast(AnthropicChat(claude(server)))
    result = model.chat([{"role": "user", "content": "hi"}])
    assert result.usage.completion_tokens == 87
    assert len(server.requests) == 3
    assert sleeps == [pytest.approx(0.001), pytest.approx(0.002)]  # exponential backoff


def test_anthropic_400_is_not_retried(server):
    server.push("anthropic_invalid_request_400", "anthropic_tool_use")
    model = fast(AnthropicChat(claude(server)))
    with pytest.raises(ModelError, match=r"400 \(invalid_request_error\).*maximum allowed number of output tokens"):
        model.chat([{"role": "user", "content": "hi"}])
    assert len(server.requests) == 1
    assert model.budget.calls == 0


def test_anthropic_missing_key_names_the_variable(server, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ModelError, match=KEY_ENV):
        AnthropicChat(claude(server))
    assert server.requests == []


# ---------------------------------------------------------------- OpenAI


def test_openai_request_conversion_and_parsed_result(server):
    server.push("openai_tool_calls")
    model = OpenAIChat(gpt(server))
    result = model.chat(CONVERSATION, tools=[BASH])

    (req,) = server.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["authorization"] == "Bearer sk-test-123"
    body = req["body"]
    assert body["model"] == "gpt-5"
    assert body["max_completion_tokens"] == 16384 and "max_tokens" not in body
    assert "logprobs" not in body and "return_token_ids" not in body
    assert body["tools"] == [{"type": "function", "function": {
        "name": "bash", "description": "Run a shell command in /app.", "parameters": BASH.parameters}}]
    assert body["messages"][:2] == CONVERSATION[:2]
    assert body["messages"][2] == {"role": "assistant", "content": "Two checks first.", "tool_calls": [
        {"id": "toolu_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}},
        {"id": "toolu_2", "type": "function", "function": {"name": "bash", "arguments": '{"command": "cat log"}'}}]}
    assert body["messages"][3:] == CONVERSATION[3:]

    assert result.text == ""
    assert result.tool_calls == [ToolCall(id="call_Qx3mZ8vK2pL7nR4tY6wB1cD9", name="bash",
                                          arguments={"command": "ls -la /app"})]
    assert result.finish_reason == "tool_calls"
    assert result.model == "gpt-5-2025-08-07"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.cached_tokens) == (
        1830, 412, 1664)
    assert result.cost_usd == pytest.approx((1830 * 1.25 + 412 * 10.0) / 1e6)
    assert not model.supports_token_ids and result.completion_token_ids is None


def test_openai_invalid_tool_arguments_kept_raw(server):
    server.push("openai_invalid_arguments")
    result = OpenAIChat(gpt(server)).chat([{"role": "user", "content": "check"}], tools=[BASH])
    ok, bad = result.tool_calls
    assert (ok.arguments, ok.raw_arguments) == ({"command": "make test"}, "")
    assert (bad.id, bad.arguments, bad.raw_arguments) == ("call_A2", {}, '{"command": "cat /app/out.txt')
    assert result.text == "Running both checks."


def test_openai_429_honours_retry_after(server, sleeps):
    server.push("openai_rate_limit_429", "openai_tool_calls")
    result = OpenAIChat(gpt(server)).chat([{"role": "user", "content": "hi"}])
    assert result.tool_calls[0].name == "bash"
    assert len(server.requests) == 2
    assert len(sleeps) == 1 and 2.0 <= sleeps[0] <= 2.5


def test_openai_500_then_success(server):
    server.push("openai_server_error_500", "openai_tool_calls")
    model = fast(OpenAIChat(gpt(server)))
    started = time.monotonic()
    result = model.chat([{"role": "user", "content": "hi"}])
    assert result.usage.prompt_tokens == 1830
    assert len(server.requests) == 2
    assert time.monotonic() - started < 1.0
    assert model.budget.calls == 1  # only the successful call is charged


def test_openai_retries_exhausted(server):
    server.push(*["openai_server_error_500"] * 3)
    model = fast(OpenAIChat(gpt(server, max_retries=2)))
    with pytest.raises(ModelError, match="giving up after 2 retries"):
        model.chat([{"role": "user", "content": "hi"}])
    assert len(server.requests) == 3


def test_openai_400_is_not_retried(server):
    server.push("openai_bad_request_400", "openai_tool_calls")
    model = fast(OpenAIChat(gpt(server, temperature=0.2)))
    with pytest.raises(ModelError, match=r"400: Unsupported value: 'temperature'"):
        model.chat([{"role": "user", "content": "hi"}])
    assert len(server.requests) == 1
    assert server.bodies[0]["temperature"] == 0.2


def test_openai_missing_key_names_the_variable(server, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ModelError, match=KEY_ENV):
        OpenAIChat(gpt(server))


def test_openai_compatible_key_is_optional(server, monkeypatch):
    server.push("vllm_logprobs_token_ids", "vllm_logprobs_token_ids")
    OpenAIChat(qwen(server)).chat([{"role": "user", "content": "hi"}])
    OpenAIChat(qwen(server, api_key_env=KEY_ENV)).chat([{"role": "user", "content": "hi"}])
    monkeypatch.delenv(KEY_ENV)
    OpenAIChat(qwen(server, api_key_env=KEY_ENV))  # variable named but unset: dummy key, no error
    auth = [r["headers"]["authorization"] for r in server.requests]
    assert auth == [f"Bearer {openai_client.DUMMY_KEY}", "Bearer sk-test-123"]


# ---------------------------------------------------------------- vLLM


def test_vllm_logprobs_and_token_ids(server):
    server.push("vllm_logprobs_token_ids")
    model = OpenAIChat(qwen(server, seed=7))
    assert model.supports_token_ids
    result = model.chat([{"role": "system", "content": "You are a helpful assistant."},
                         {"role": "user", "content": "What is 6 times 7?"}], max_tokens=64, temperature=0.6)

    body = server.bodies[0]
    assert body["logprobs"] is True
    assert body["return_token_ids"] is True and body["return_tokens_as_token_ids"] is True
    assert body["max_tokens"] == 64 and body["temperature"] == 0.6 and body["seed"] == 7
    assert "max_completion_tokens" not in body

    rec = recorded("vllm_logprobs_token_ids")["body"]
    assert result.text == "The answer is 42."
    assert result.finish_reason == "stop"
    assert result.prompt_token_ids == rec["prompt_token_ids"]
    assert result.completion_token_ids == [785, 4226, 374, 220, 19, 17, 13, 151645]
    assert result.completion_logprobs == [c["logprob"] for c in rec["choices"][0]["logprobs"]["content"]]
    assert len(result.completion_logprobs) == len(result.completion_token_ids) == result.usage.completion_tokens
    assert result.usage.prompt_tokens == len(result.prompt_token_ids)
    assert result.cost_usd == 0.0  # no prices configured


def test_vllm_without_return_token_ids_falls_back_to_logprob_tokens(server):
    server.push("vllm_logprobs_legacy")
    result = OpenAIChat(qwen(server)).chat([{"role": "user", "content": "What is 6 times 7?"}])
    assert result.prompt_token_ids is None
    assert result.completion_token_ids == [785, 4226, 374, 220, 19, 17, 13, 151645]
    assert len(result.completion_logprobs) == 8


def test_vllm_without_logprobs_requests_none(server):
    server.push("vllm_logprobs_legacy")
    model = OpenAIChat(qwen(server, logprobs=False))
    result = model.chat([{"role": "user", "content": "hi"}])
    assert not model.supports_token_ids
    assert "logprobs" not in server.bodies[0] and "return_token_ids" not in server.bodies[0]
    assert result.completion_logprobs is None and result.completion_token_ids is None


def test_hosted_openai_with_logprobs_asks_no_token_ids(server):
    server.push("openai_tool_calls")
    model = OpenAIChat(gpt(server, logprobs=True))
    model.chat([{"role": "user", "content": "hi"}])
    assert not model.supports_token_ids
    assert server.bodies[0]["logprobs"] is True and "return_token_ids" not in server.bodies[0]


def test_vllm_flat_error_body_message(server):
    server.push("vllm_context_length_400")
    with pytest.raises(ModelError, match="maximum context length is 40960 tokens"):
        fast(OpenAIChat(qwen(server))).chat([{"role": "user", "content": "hi"}])
    assert len(server.requests) == 1


# ---------------------------------------------------------------- both


def _error(status: int, headers: dict[str, str] | None = None) -> dict[str, Any]:
    return {"status": status, "headers": headers or {},
            "body": {"type": "error", "error": {"type": "api_error", "message": f"status {status}"}}}


@pytest.mark.parametrize("status,retried", [
    (408, True), (429, True), (500, True), (502, True), (503, True), (529, True),
    (400, False), (401, False), (403, False), (404, False), (422, False)])
@pytest.mark.parametrize("backend", ["anthropic", "openai"])
def test_status_classification(server, sleeps, backend, status, retried):
    if backend == "anthropic":
        server.push(_error(status), "anthropic_tool_use")
        model = AnthropicChat(claude(server))
    else:
        server.push(_error(status), "openai_tool_calls")
        model = OpenAIChat(gpt(server))
    if retried:
        assert model.chat([{"role": "user", "content": "hi"}]).tool_calls
        assert len(server.requests) == 2 and len(sleeps) == 1
    else:
        with pytest.raises(ModelError, match=f"status {status}"):
            model.chat([{"role": "user", "content": "hi"}])
        assert len(server.requests) == 1 and sleeps == []


def test_server_saying_do_not_retry_is_honoured(server):
    server.push(_error(500, {"x-should-retry": "false"}), "anthropic_tool_use")
    with pytest.raises(ModelError, match="status 500"):
        fast(AnthropicChat(claude(server))).chat([{"role": "user", "content": "hi"}])
    assert len(server.requests) == 1


def test_retry_after_forms():
    from aes.models.base import retry_after_seconds as parse

    assert parse({"retry-after": "3"}) == 3.0
    assert parse({"retry-after-ms": "250", "retry-after": "3"}) == 0.25
    assert parse({}) is None and parse({"retry-after": "soon"}) is None
    future = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 <= parse({"retry-after": future}) <= 31


def test_timeout_is_retried(server):
    server.push({**recorded("openai_tool_calls"), "delay": 0.5}, "openai_tool_calls")
    model = fast(OpenAIChat(gpt(server, timeout_sec=0.1, max_retries=1)))
    assert model.chat([{"role": "user", "content": "hi"}]).tool_calls
    assert len(server.requests) == 2


def closed_port() -> int:
    """A local port nobody listens on (bound, then released): connecting to it is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("backend", ["anthropic", "openai", "openai_compatible"])
def test_connection_refused_is_retried_then_model_unavailable_naming_the_url(server, backend):
    url = f"http://127.0.0.1:{closed_port()}"
    if backend == "anthropic":
        model = AnthropicChat(claude(server, base_url=url, max_retries=2))
    elif backend == "openai":
        model = OpenAIChat(gpt(server, base_url=url + "/v1", max_retries=2))
    else:
        model = OpenAIChat(qwen(server, base_url=url + "/v1", max_retries=2))
    with pytest.raises(ModelUnavailable, match="giving up after 2 retries") as err:
        fast(model).chat([{"role": "user", "content": "hi"}])
    assert isinstance(err.value, InfrastructureError) and isinstance(err.value, ModelError)
    assert url in str(err.value) and "Connection refused" in str(err.value)
    if backend == "openai_compatible":
        assert "solver.base_url" in str(err.value) and "vllm serve Qwen/Qwen3-8B" in str(err.value)


@pytest.mark.parametrize("fixture,backend", [("openai_server_error_500", "openai"),
                                             ("anthropic_overloaded_529", "anthropic")])
def test_server_errors_after_the_retries_are_model_unavailable(server, fixture, backend):
    server.push(*[fixture] * 3)
    model = fast(OpenAIChat(gpt(server, max_retries=2)) if backend == "openai"
                 else AnthropicChat(claude(server, max_retries=2)))
    with pytest.raises(ModelUnavailable, match="giving up after 2 retries") as err:
        model.chat([{"role": "user", "content": "hi"}])
    assert server.url in str(err.value) and len(server.requests) == 3


@pytest.mark.parametrize("reply,unavailable", [
    ("vllm_context_length_400", False),  # the request's fault: an ordinary model error
    ("openai_bad_request_400", False),
    ("openai_invalid_key_401", True),  # no request could pass: the key is refused
    (_error(500, {"x-should-retry": "false"}), True),  # not retried, still the server's failure
    (_error(404), True),  # unknown model or endpoint
    (_error(422), False),
])
def test_request_errors_stay_model_errors_server_errors_are_unavailable(server, reply, unavailable):
    server.push(reply)
    with pytest.raises(ModelError) as err:
        fast(OpenAIChat(qwen(server))).chat([{"role": "user", "content": "hi"}])
    assert isinstance(err.value, ModelUnavailable) is unavailable
    assert len(server.requests) == 1


# ---------------------------------------------------------------- health checks


def test_vllm_health_check_lists_the_models(server, caplog):
    server.push("vllm_models", "vllm_models")
    OpenAIChat(qwen(server)).health_check()
    assert server.requests[0]["path"] == "/v1/models"
    OpenAIChat(qwen(server, model="Qwen/Qwen3-32B")).health_check()  # answered, but not this model: a warning
    assert "serves Qwen/Qwen3-8B, not model=Qwen/Qwen3-32B" in caplog.text


def test_vllm_health_check_names_the_url_and_what_to_set(server):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    model = OpenAIChat(qwen(server, base_url=url, max_retries=5))
    started = time.monotonic()
    with pytest.raises(ModelUnavailable) as err:
        model.health_check()
    assert time.monotonic() - started < 2.0  # one try, no backoff
    message = str(err.value)
    assert f"cannot reach {url}/models" in message and "Connection refused" in message
    assert "solver.base_url / proposer.base_url" in message and "vllm serve" in message


def test_vllm_health_check_fails_on_a_wrong_path(server):
    server.push(_error(404))  # base_url without /v1: the server answers, but not the API
    with pytest.raises(ModelUnavailable, match=f"GET {server.url}/models answered 404"):
        OpenAIChat(qwen(server, base_url=server.url)).health_check()


def test_hosted_health_checks_pass(server):
    server.push("openai_models", "anthropic_models")
    OpenAIChat(gpt(server)).health_check()
    AnthropicChat(claude(server)).health_check()
    assert [r["path"] for r in server.requests] == ["/v1/models", "/v1/models?limit=1"]
    assert all(r["headers"]["authorization"] == "Bearer sk-test-123" for r in server.requests)


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_hosted_health_check_needs_the_key_variable(server, monkeypatch, backend):
    model = OpenAIChat(gpt(server)) if backend == "openai" else AnthropicChat(claude(server))
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ModelUnavailable, match=f"set the environment variable {KEY_ENV}"):
        model.health_check()
    assert server.requests == []
    with pytest.raises(ModelUnavailable, match=KEY_ENV):  # the constructor says the same
        OpenAIChat(gpt(server)) if backend == "openai" else AnthropicChat(claude(server))


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_hosted_health_check_refused_key_and_unreachable_api(server, backend):
    if backend == "openai":
        server.push("openai_invalid_key_401")
        model = OpenAIChat(gpt(server))
    else:
        server.push("anthropic_authentication_401")
        model = AnthropicChat(claude(server))
    with pytest.raises(ModelUnavailable, match="refused the") as err:
        model.health_check()
    assert KEY_ENV in str(err.value)
    url = f"http://127.0.0.1:{closed_port()}"
    model = (OpenAIChat(gpt(server, base_url=url + "/v1")) if backend == "openai"
             else AnthropicChat(claude(server, base_url=url)))
    with pytest.raises(ModelUnavailable, match=f"cannot reach {url}"):
        model.health_check()


def test_check_models_lists_every_failure_once(server):
    down = [f"http://127.0.0.1:{closed_port()}/v1" for _ in range(2)]
    server.push("vllm_models", "vllm_models")
    up = OpenAIChat(qwen(server))
    solver = OpenAIChat(qwen(server, name="solver", base_url=down[0]))
    proposer = OpenAIChat(qwen(server, name="proposer", base_url=down[1]))
    check_models(up, up, None)  # each model once; None (no such role) is skipped
    assert len(server.requests) == 1
    with pytest.raises(ModelUnavailable) as err:
        check_models(solver, up, proposer)
    message = str(err.value)
    assert message.startswith("2 models cannot serve:")
    assert f"solver: cannot reach {down[0]}/models" in message and f"proposer: cannot reach {down[1]}/models" in message
    assert len(server.requests) == 2




def test_run_budget_stops_further_calls(server):
    server.push("anthropic_tool_use", "anthropic_tool_use", "openai_tool_calls")
    budget = RunBudget(BudgetConfig(max_usd=0.01))
    proposer = AnthropicChat(claude(server), budget)
    solver = OpenAIChat(gpt(server), budget)  # models of one run share its budget
    first = proposer.chat([{"role": "user", "content": "hi"}])
    assert first.cost_usd > 0.01
    with pytest.raises(BudgetExhausted, match="budget.max_usd"):
        proposer.chat([{"role": "user", "content": "again"}])
    with pytest.raises(BudgetExhausted):
        solver.chat([{"role": "user", "content": "hi"}])
    assert len(server.requests) == 1
    assert budget.summary()["model_calls"] == 1


def test_token_budget_stops_further_calls(server):
    server.push("vllm_logprobs_token_ids", "vllm_logprobs_token_ids")
    model = OpenAIChat(qwen(server), RunBudget(BudgetConfig(max_tokens=30)))
    model.chat([{"role": "user", "content": "hi"}])  # 27 + 8 tokens
    with pytest.raises(BudgetExhausted, match="budget.max_tokens"):
        model.chat([{"role": "user", "content": "hi"}])
    assert len(server.requests) == 1


def test_build_model_from_config_files(server):
    from aes.config import compose_config

    cfg = compose_config(["proposer=claude", "solver=qwen9b", f"+proposer.base_url={server.url}",
                          f"solver.base_url={server.url}/v1", f"proposer.api_key_env={KEY_ENV}"])
    proposer, solver = build_model(cfg.proposer), build_model(cfg.solver)
    assert isinstance(proposer, AnthropicChat) and proposer.supports_tools
    assert isinstance(solver, OpenAIChat) and solver.supports_token_ids
    server.push("anthropic_tool_use", "vllm_logprobs_token_ids")
    assert proposer.chat([{"role": "user", "content": "hi"}]).cost_usd == pytest.approx(
        (1523 * 3.0 + 2048 * 0.3 + 87 * 15.0) / 1e6)  # the cache reads at claude.yaml's cached price
    assert solver.chat([{"role": "user", "content": "hi"}]).completion_token_ids
    assert server.bodies[0]["model"] == cfg.proposer.model
    assert server.bodies[1]["model"] == "Qwen/Qwen3.5-9B" and server.bodies[1]["logprobs"] is True


# ---------------------------------------------------------------- what a model accepts (issue 26 item 5)


def shipped(name: str, server: ReplayServer, *overrides: str):
    """The model of ``conf/proposer/<name>.yaml``, pointed at the replay server."""
    from aes.config import compose_config

    url = server.url + ("/v1" if name != "claude" else "")
    key = "base_url" if name == "qwen" else "+base_url"
    cfg = compose_config([f"proposer={name}", f"{key.replace('base_url', 'proposer.base_url')}={url}",
                          f"proposer.api_key_env={KEY_ENV}", *overrides])
    return cfg, build_model(cfg.proposer)


def openai_reply(text: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    """A chat.completion with a text answer, as the API sends it."""
    return {"status": 200, "headers": {"content-type": "application/json", "x-request-id": "req_5b9e2f"},
            "body": {"id": "chatcmpl-CRv8tQ1zX4mN6pL2", "object": "chat.completion", "created": 1760000000,
                     "model": "gpt-5-2025-08-07",
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None,
                                                          "annotations": []},
                                  "logprobs": None, "finish_reason": "stop"}],
                     "usage": usage or {"prompt_tokens": 2900, "completion_tokens": 1480, "total_tokens": 4380,
                                        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                                        "completion_tokens_details": {"reasoning_tokens": 1216, "audio_tokens": 0,
                                                                      "accepted_prediction_tokens": 0,
                                                                      "rejected_prediction_tokens": 0}},
                     "service_tier": "default", "system_fingerprint": None}}


@pytest.mark.parametrize("declared", [True, False])
def test_the_review_sends_no_parameter_the_model_rejects(server, declared):
    """gpt.yaml declares temperature unsupported; the API (played by ``rejects``) answers a request
    carrying one other than its default with a 400. Undeclared, with a temperature of 0.7 configured,
    every task fails review as review.grader_error."""
    from aes.admission.review import Reviewer
    from tests.conftest import FIXTURES

    cfg, grader = shipped("gpt", server, "proposer.temperature=0.7",
                          *([] if declared else ["proposer.unsupported_params=[]"]))
    server.rejects["temperature"] = recorded("openai_temperature_400")
    verdict = json.dumps({"criteria": [{"name": c.name, "pass": True, "reason": "fine"}
                                       for c in cfg.admission.rubric_for("terminal")]})
    server.push(openai_reply(verdict))
    review = Reviewer(grader, cfg.admission, "terminal").review(FIXTURES / "good")
    (body,) = server.bodies
    if not declared:
        assert body["temperature"] == 0.7  # the config's (the review asks for none of its own)
        assert [r.code for r in review.reasons] == ["review.grader_error"] and "temperature" in review.reasons[0].message
        return
    assert review.passed and "temperature" not in body
    # the verdict's budget is review_max_tokens; the reasoning comes on top of it
    assert body["max_completion_tokens"] == cfg.admission.review_max_tokens + 16384
    assert body["reasoning_effort"] == "medium" and "tools" not in body and "parallel_tool_calls" not in body
    assert review.tokens == 2900 + 1480
    assert grader.budget.summary()["reasoning_tokens"] == 1216


def test_the_hil_judge_sends_no_temperature(server):
    from aes.hil.blockers import Blocker
    from aes.hil.human import ModelJudge

    _, model = shipped("gpt", server)
    server.rejects["temperature"] = recorded("openai_temperature_400")
    server.push(openai_reply('["currency"]'))
    blockers = [Blocker(id="currency", type="missing_parameters", topic="the currency of the totals", answer="EUR",
                        keywords=("currency",))]
    assert ModelJudge(model, "Match questions to blockers.").match("Which currency?", blockers) == ["currency"]
    assert "temperature" not in server.bodies[0]


def test_a_temperature_a_caller_asks_for_is_dropped_where_the_model_rejects_it(server):
    server.rejects["temperature"] = recorded("openai_temperature_400")
    server.push(openai_reply("ok"))
    _, declared = shipped("gpt", server)
    assert declared.chat([{"role": "user", "content": "hi"}], temperature=0.0).text == "ok"
    _, undeclared = shipped("gpt", server, "proposer.unsupported_params=[]")
    with pytest.raises(ModelError, match="Unsupported value: 'temperature'"):
        undeclared.chat([{"role": "user", "content": "hi"}], temperature=0.0)
    assert "temperature" not in server.bodies[0] and server.bodies[1]["temperature"] == 0.0


def test_anthropic_request_follows_the_model_config(server):
    _, claude_model = shipped("claude", server)
    body = claude_model.request_params(CONVERSATION, [BASH], 1000)
    assert body["max_tokens"] == 1000 + 16384  # thinking counts in max_tokens: it comes on top
    assert body["thinking"] == {"type": "adaptive"} and body["cache_control"] == {"type": "ephemeral"}
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert "temperature" not in body and "output_config" not in body
    assert "tool_choice" not in claude_model.request_params(CONVERSATION, None, 1000)  # no tools, no choice
    _, other = shipped("claude", server, "proposer.unsupported_params=[temperature,thinking,prompt_cache]",
                       "proposer.parallel_tool_calls=true", "proposer.reasoning_effort=high",
                       "proposer.thinking=enabled", "proposer.reasoning_tokens=2048")
    body = other.request_params(CONVERSATION, [BASH], 1000)
    assert "thinking" not in body and "cache_control" not in body and "tool_choice" not in body
    assert body["output_config"] == {"effort": "high"} and body["max_tokens"] == 3048
    _, enabled = shipped("claude", server, "proposer.thinking=enabled", "proposer.reasoning_tokens=2048")
    assert enabled.request_params(CONVERSATION, [BASH], 1000)["thinking"] == {"type": "enabled", "budget_tokens": 2048}


def test_openai_request_follows_the_model_config(server):
    _, gpt_model = shipped("gpt", server)
    body = gpt_model.request_params(CONVERSATION, [BASH], 1000, 0.0)
    assert "temperature" not in body and body["parallel_tool_calls"] is False
    assert body["max_completion_tokens"] == 1000 + 16384 and body["reasoning_effort"] == "medium"
    assert "parallel_tool_calls" not in gpt_model.request_params(CONVERSATION, None, 1000, 0.0)
    _, other = shipped("gpt", server, "proposer.unsupported_params=[parallel_tool_calls,reasoning_effort]")
    body = other.request_params(CONVERSATION, [BASH], 1000, 0.0)
    assert body["temperature"] == 0.0 and "parallel_tool_calls" not in body and "reasoning_effort" not in body
    _, qwen_model = shipped("qwen", server)  # vLLM: the policy's parallel calls are all run, none filtered
    body = qwen_model.request_params(CONVERSATION, [BASH], 1000, 0.7)
    assert "parallel_tool_calls" not in body and body["temperature"] == 0.7 and body["max_tokens"] == 1000


def test_anthropic_thinking_usage_and_cache_prices(server):
    server.push("anthropic_thinking_tool_use", "anthropic_tool_use")
    _, model = shipped("claude", server)
    messages = [{"role": "system", "content": "You build tasks."}, {"role": "user", "content": "Start."}]
    result = model.chat(messages, tools=[BASH])
    rec = recorded("anthropic_thinking_tool_use")["body"]
    assert result.reasoning == rec["content"][0]["thinking"]
    assert result.text == "First the assignment and the parent task."
    usage = result.usage
    assert (usage.prompt_tokens, usage.cached_tokens, usage.cache_write_tokens) == (412 + 1536 + 3688, 1536, 3688)
    assert (usage.completion_tokens, usage.reasoning_tokens, usage.context) == (318, 241, 412 + 1536 + 3688 + 318 - 241)
    # claude.yaml: input 3.0, cache reads 0.3, cache writes 3.75, output 15.0 (thinking billed as output)
    assert result.cost_usd == pytest.approx((412 * 3.0 + 1536 * 0.3 + 3688 * 3.75 + 318 * 15.0) / 1e6)
    assert result.reasoning_cost_usd == pytest.approx(241 * 15.0 / 1e6)
    # the next turn sends the signed thinking block back, unchanged, ahead of the text and the call
    messages += [{"role": "assistant", "content": result.text, "reasoning_blocks": result.reasoning_blocks,
                  "tool_calls": [result.tool_calls[0].__dict__]},
                 {"role": "tool", "tool_call_id": result.tool_calls[0].id, "content": "# Assignment ..."}]
    model.chat(messages, tools=[BASH])
    assistant = server.bodies[1]["messages"][1]
    assert assistant["content"][0] == rec["content"][0]
    assert [b["type"] for b in assistant["content"]] == ["thinking", "text", "tool_use"]
    assert model.budget.summary()["cache_write_tokens"] == 3688 and model.budget.summary()["reasoning_tokens"] == 241


def test_openai_reasoning_and_cached_tokens_apart(server):
    server.push("openai_tool_calls", openai_reply("ok", {
        "prompt_tokens": 5000, "completion_tokens": 300, "total_tokens": 5300,
        "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 4096},
        "completion_tokens_details": {"reasoning_tokens": 256}}))
    _, model = shipped("gpt", server)
    result = model.chat([{"role": "user", "content": "hi"}], tools=[BASH])
    assert (result.usage.cached_tokens, result.usage.reasoning_tokens) == (1664, 384)
    assert result.usage.context == 1830 + 412 - 384  # reasoning is not carried into the next prompt
    # gpt.yaml: input 1.25, cached input 0.125, output 10.0
    assert result.cost_usd == pytest.approx((166 * 1.25 + 1664 * 0.125 + 412 * 10.0) / 1e6)
    assert result.reasoning_cost_usd == pytest.approx(384 * 10.0 / 1e6)
    written = model.chat([{"role": "user", "content": "hi"}]).usage
    assert written.cache_write_tokens == 4096  # no write price set: written tokens at the input price


@pytest.mark.parametrize("overrides,match", [
    (["proposer.unsupported_params=[top_k]"], "unsupported_params names top_k"),
    (["proposer.thinking=enabled", "proposer.reasoning_tokens=512"], "at least 1024"),
    (["proposer.reasoning_effort=extreme"], "reasoning_effort must be one of"),
    (["proposer.thinking=sometimes"], "thinking must be adaptive"),
])
def test_request_settings_are_checked(server, overrides, match):
    from aes.config import ConfigError

    with pytest.raises(ConfigError, match=match):
        shipped("claude", server, *overrides)


def test_anthropic_effort_values_are_its_own(server):
    from aes.config import ConfigError

    with pytest.raises(ConfigError, match="backend anthropic.*reasoning_effort must be one of low"):
        shipped("claude", server, "proposer.reasoning_effort=minimal")


def test_a_ray_workers_usage_adds_its_parts_to_the_runs_budget(server):
    """A trial on a Ray worker charges its model's budget summary to the driver's, parts included."""
    from aes.sandbox.ray_executor import _charge

    server.push("anthropic_thinking_tool_use")
    _, worker = shipped("claude", server)
    worker.chat([{"role": "user", "content": "hi"}])
    driver = RunBudget()
    _charge(driver, worker.budget.summary())
    assert driver.summary() == pytest.approx(worker.budget.summary())
    assert driver.summary()["cache_write_tokens"] == 3688 and driver.summary()["reasoning_tokens"] == 241
