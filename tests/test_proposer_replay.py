"""A multi-turn proposer episode per provider, replayed from its recorded protocol to an admitted task.

``tests/fixtures/replays/{anthropic,openai}_proposer_episode.json`` hold what the Messages API and
chat.completions answer, exchange by exchange, to an episode of the terminal harness with the
shipped model configs (``conf/proposer/claude.yaml``, ``gpt.yaml``): the proposer reads its
assignment, writes a task, submits it without validating; admission's review (graded by the same
model) rejects it on one criterion; after the feedback the proposer writes a second draft,
validates it (the review inside ``validate`` passes) and submits; it is admitted.

What runs is what a user runs, except the provider: the real SDK clients (``anthropic``,
``openai``: their own request building and response parsing) against a local server that serves
the recording (:mod:`tests.replay`), the real terminal harness in its Docker container (the
commands run there and write the drafts), the real admission (image builds, reference and
do-nothing runs, review, calibration with a scripted solver). The server plays the API's
refusal of a parameter the model does not accept (a request carrying one gets the 400 and the
episode fails), and the test checks every request aes sent: tool schemas, one tool result for
every call, the reasoning the provider wants back, the token limits, no rejected parameter.
"""

from __future__ import annotations

import json

import pytest

from aes.agents.terminal import BASH_TOOL, SUBMIT_TOOL
from aes.config import AgentConfig, compose_config
from aes.models import build_model
from aes.proposer.tools import SOLVER_SPEC, VALIDATE_SPEC
from tests.replay import REPLAYS, offline, recorded, replay_server
from tests.test_agent import Scripted, reply

KEY_ENV = "AES_TEST_MODEL_KEY"
TOOLS = [BASH_TOOL, VALIDATE_SPEC, SOLVER_SPEC, SUBMIT_TOOL]
"""The terminal harness's tools, in the order the episode offers them."""
SOLVE = [reply("```bash\necho 42 > /app/answer.txt\n```"), reply("DONE")]
GIVE_UP = [reply("DONE")]
TURNS, REVIEWS = [0, 1, 2, 4, 5, 7], [3, 6, 8]
"""Which exchanges are the proposer's turns and which the reviews its model grades."""
REJECTED_AFTER = 4
"""The request that carries admission's feedback on the first submission."""

pytestmark = pytest.mark.docker


def exchanges(provider: str) -> list[dict]:
    return json.loads((REPLAYS / f"{provider}_proposer_episode.json").read_text())["exchanges"]


@pytest.fixture
def episode(sandbox, tmp_path, monkeypatch):
    """Run one recorded episode: ``(provider) -> (result, stack, requests)``."""
    from aes.compose import build_admission, build_proposer_stack
    from aes.paths import RunPaths
    from aes.pool import PoolStore
    from aes.proposer.assignments import SIMPLER, Assignment
    from aes.proposer.generate import run_assignments, seed_pool
    from aes.rollout import RolloutRunner
    from aes.sandbox import TrialRunner

    offline(monkeypatch, KEY_ENV)

    def run(provider: str, *overrides: str):
        name = {"anthropic": "claude", "openai": "gpt"}[provider]
        with replay_server() as server:
            url = server.url + ("/v1" if provider == "openai" else "")
            cfg = compose_config([f"proposer={name}", "harness=terminal", f"+proposer.base_url={url}",
                                  f"proposer.api_key_env={KEY_ENV}", *overrides])
            server.push(*({k: v for k, v in e.items() if k != "what"} for e in exchanges(provider)))
            server.rejects["temperature"] = recorded(f"{provider}_temperature_400")
            proposer = build_model(cfg.proposer)  # the real client, as `proposer=claude` builds it
            solver = Scripted(SOLVE + GIVE_UP + SOLVE + GIVE_UP)  # calibration: 2 of 4 attempts solve
            rollouts = RolloutRunner(solver, AgentConfig(), TrialRunner(cfg.sandbox, sandbox), tmp_path / "run",
                                     concurrency=1, solver_name="scripted")
            paths = RunPaths(tmp_path / "run")
            validator, pipeline, _ = build_admission(cfg, rollouts.trials, rollouts, proposer)
            stack = build_proposer_stack(cfg, paths, proposer, rollouts, PoolStore(paths.pool), pipeline, validator)
            seed_pool(stack)
            parent = stack.pool.envs("admitted")[0]
            [result] = run_assignments(stack, [Assignment(parent.env_id, parent.name, "scripted", 0.0,
                                                          "no output file (agent: format_errors)", SIMPLER)])
            proposer.close()
            return result, stack, server.requests, server.script

    return run


def _admitted(result, stack, leftover, requests, provider) -> dict:
    """The episode reached an admitted task through one rejection and one revision; its trajectory."""
    assert leftover == [] and len(requests) == len(exchanges(provider))  # every recorded answer was asked for
    assert result.outcome == "admitted" and result.revisions == 1 and result.failed_stages == ["review"]
    assert [r.split(":")[0] for r in result.reasons] == ["review.output_schema_explicit"]
    env = stack.pool.get(result.env_id)
    assert env.status == "admitted" and env.mean_reward == 0.5
    assert "decimal digits" in (env.path / "instruction.md").read_text()  # the revision's draft (env_002)
    assert [v["stage"] for v in stack.pool.verdicts(env.env_id)] == ["checks_1_4", "decontam_review", "calibration"]
    trajectory = json.loads(open(result.trajectory_path).read())
    assert trajectory["extra"]["outcome"] == "admitted" and trajectory["extra"]["end_reasons"] == ["done", "done"]
    observations = [r["content"] for s in trajectory["steps"] if s.get("observation")
                    for r in s["observation"]["results"]]
    assert "# Assignment" in observations[0] and "# Admission" in observations[0] and observations[2] == "submitted"
    assert "./environment/data/orders.csv" in observations[1] and observations[1].rstrip().endswith("42")
    validated = observations[4]
    assert validated.startswith("valid: yes\nchecks 1-4: passed; oracle reward 1.0; do-nothing reward 0.0")
    assert "review: passed" in validated
    return trajectory


def _spent(result, trajectory, usages: list[tuple[int, float, int]]) -> None:
    """Tokens and USD of every call (turns and reviews) add up; reasoning is counted apart."""
    assert result.tokens == sum(total for total, _, _ in usages)
    assert result.cost_usd == pytest.approx(sum(usd for _, usd, _ in usages))
    agent = [s for s in trajectory["steps"] if s["source"] == "agent"]
    assert [s["metrics"]["reasoning_tokens"] for s in agent] == [usages[i][2] for i in TURNS]
    assert trajectory["final_metrics"]["total_reasoning_tokens"] == sum(usages[i][2] for i in TURNS)


# ---------------------------------------------------------------- Anthropic


def _claude_usage(exchange: dict) -> tuple[int, float, int]:
    u = exchange["body"]["usage"]
    prompt = u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"]
    usd = (u["input_tokens"] * 3.0 + u["cache_read_input_tokens"] * 0.3 + u["cache_creation_input_tokens"] * 3.75
           + u["output_tokens"] * 15.0) / 1e6  # claude.yaml's prices, cache reads and writes included
    return prompt + u["output_tokens"], usd, u["output_tokens_details"]["thinking_tokens"]


def _anthropic_requests(requests: list[dict], recording: list[dict]) -> None:
    bodies = [r["body"] for r in requests]
    for request, body in zip(requests, bodies):
        assert request["path"] == "/v1/messages" and request["headers"]["authorization"] == "Bearer sk-test-123"
        assert body["model"] == "claude-sonnet-5-5" and "temperature" not in body
        assert body["thinking"] == {"type": "adaptive"} and body["cache_control"] == {"type": "ephemeral"}
    for i in TURNS:
        body = bodies[i]
        assert [t["name"] for t in body["tools"]] == [t.name for t in TOOLS]
        assert [(t["description"], t["input_schema"]) for t in body["tools"]] == [(t.description, t.parameters)
                                                                                  for t in TOOLS]
        assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
        assert body["max_tokens"] == 16384 + 16384  # a turn's budget, the thinking on top
        assert body["system"].startswith("You build training tasks for a terminal agent")
        _every_tool_use_answered(body["messages"])
    for i in REVIEWS:
        body = bodies[i]
        assert "tools" not in body and "tool_choice" not in body
        assert body["max_tokens"] == 2048 + 16384  # admission.review_max_tokens, the thinking on top
        assert body["system"].startswith("You review training tasks")
    # each turn's signed thinking goes back, unchanged, in the proposer's next request
    for before, after in zip(TURNS, TURNS[1:]):
        sent = [b for m in bodies[after]["messages"] if m["role"] == "assistant" for b in m["content"]
                if b["type"] == "thinking"]
        for block in recording[before]["body"]["content"]:
            if block["type"] == "thinking":
                assert block in sent
    feedback = bodies[REJECTED_AFTER]["messages"][-1]["content"]
    assert [b["type"] for b in feedback] == ["tool_result", "text"]  # the submit's result, then the feedback
    assert feedback[0]["content"] == "submitted"
    assert "review.output_schema_explicit" in feedback[1]["text"]


def _every_tool_use_answered(messages: list[dict]) -> None:
    """Each assistant turn's tool_use blocks are answered in the next user turn, one result each."""
    assert messages[0]["role"] == "user"
    for i, turn in enumerate(messages):
        uses = [b["id"] for b in turn["content"] if b["type"] == "tool_use"]
        if turn["role"] == "assistant":
            assert len(uses) <= 1  # one call a reply, as requested
            if uses:
                answers = [b["tool_use_id"] for b in messages[i + 1]["content"] if b["type"] == "tool_result"]
                assert answers == uses and messages[i + 1]["content"][0]["type"] == "tool_result"


def test_anthropic_episode_replayed_to_an_admitted_task(episode):
    result, stack, requests, leftover = episode("anthropic")
    recording = exchanges("anthropic")
    trajectory = _admitted(result, stack, leftover, requests, "anthropic")
    _anthropic_requests(requests, recording)
    _spent(result, trajectory, [_claude_usage(e) for e in recording])
    agent = [s for s in trajectory["steps"] if s["source"] == "agent"]
    assert agent[0]["reasoning_content"].startswith("Start with the assignment")
    assert agent[0]["metrics"]["cache_write_tokens"] == 3221 and agent[1]["metrics"]["cached_tokens"] == 3221


# ---------------------------------------------------------------- OpenAI


def _gpt_usage(exchange: dict) -> tuple[int, float, int]:
    u = exchange["body"]["usage"]
    cached = u["prompt_tokens_details"]["cached_tokens"]
    usd = ((u["prompt_tokens"] - cached) * 1.25 + cached * 0.125 + u["completion_tokens"] * 10.0) / 1e6
    return u["total_tokens"], usd, u["completion_tokens_details"]["reasoning_tokens"]


def _openai_requests(requests: list[dict]) -> None:
    bodies = [r["body"] for r in requests]
    for request, body in zip(requests, bodies):
        assert request["path"] == "/v1/chat/completions"
        assert request["headers"]["authorization"] == "Bearer sk-test-123"
        assert body["model"] == "gpt-5" and "temperature" not in body and "max_tokens" not in body
        assert body["reasoning_effort"] == "medium"
    for i in TURNS:
        body = bodies[i]
        assert body["tools"] == [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                                   "parameters": t.parameters}} for t in TOOLS]
        assert body["parallel_tool_calls"] is False
        assert body["max_completion_tokens"] == 16384 + 16384  # a turn's budget, the reasoning on top
        assert body["messages"][0]["role"] == "system"
        calls = [c["id"] for m in body["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        answered = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
        assert answered == calls and len(calls) == len(set(calls))
        for m in body["messages"]:
            for call in m.get("tool_calls") or []:
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
    for i in REVIEWS:
        body = bodies[i]
        assert "tools" not in body and "parallel_tool_calls" not in body
        assert body["max_completion_tokens"] == 2048 + 16384  # admission.review_max_tokens, reasoning on top
    feedback = bodies[REJECTED_AFTER]["messages"]
    assert feedback[-2]["role"] == "tool" and feedback[-2]["content"] == "submitted"
    assert feedback[-1]["role"] == "user" and "review.output_schema_explicit" in feedback[-1]["content"]


def test_openai_episode_replayed_to_an_admitted_task(episode):
    result, stack, requests, leftover = episode("openai")
    recording = exchanges("openai")
    trajectory = _admitted(result, stack, leftover, requests, "openai")
    _openai_requests(requests)
    _spent(result, trajectory, [_gpt_usage(e) for e in recording])
    assert trajectory["final_metrics"]["total_cached_tokens"] == sum(
        recording[i]["body"]["usage"]["prompt_tokens_details"]["cached_tokens"] for i in TURNS)


def test_openai_episode_fails_where_the_model_config_sends_a_rejected_parameter(episode):
    """The same recording with gpt.yaml's declaration taken out and a temperature of 0.7 set: the API's
    400 for it ends every turn, nothing is handed in and the review never runs. (Declared, the same
    temperature is never sent: test_model_clients.)"""
    result, stack, requests, _ = episode("openai", "proposer.unsupported_params=[]", "proposer.temperature=0.7")
    assert requests[0]["body"]["temperature"] == 0.7
    assert result.outcome == "broken" and "no_draft" in result.failed_stages
    assert all("temperature" in r["body"] for r in requests)
    trajectory = json.loads(open(result.trajectory_path).read())
    assert "Unsupported value: 'temperature'" in trajectory["extra"]["error"]
