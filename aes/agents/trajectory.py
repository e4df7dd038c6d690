"""Trajectory records in Harbor's ATIF format (field names of ATIF-v1.8).

One file per episode: the system and user steps, then one agent step per model call with
its message, reasoning (where the provider shows it), tool calls (the shell command; several
when the model called tools in parallel), observation (one result per call: command output
and exit code) and metrics (tokens, with the cached, cache-written and reasoning ones apart,
cost, and the exact prompt/completion token ids and log-probs the trainer needs). Run-level
facts (task, reward, verifier output, end reason, context compactions) live in ``extra``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from pathlib import Path
from typing import Any

from aes import __version__
from aes.models import ChatResult, ToolCall

SCHEMA_VERSION = "ATIF-v1.8"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


class TrajectoryRecorder:
    """Builds one ATIF trajectory as the episode runs."""

    def __init__(self, agent_name: str, model_name: str, tool_definitions: list[dict] | None = None):
        self.data: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "session_id": uuid.uuid4().hex,
            "agent": {"name": agent_name, "version": __version__, "model_name": model_name,
                      "tool_definitions": tool_definitions},
            "steps": [],
            "final_metrics": None,
            "extra": {},
        }

    @property
    def steps(self) -> list[dict[str, Any]]:
        return self.data["steps"]

    def add_message(self, source: str, message: str) -> None:
        """A system or user step."""
        self.steps.append({"step_id": len(self.steps) + 1, "timestamp": _now(), "source": source,
                           "message": message})

    def add_agent_step(self, result: ChatResult, call: ToolCall | list[ToolCall] | None) -> dict[str, Any]:
        """An agent step for one model call and the tool call(s) it made; returns it so the
        observations can be attached."""
        step: dict[str, Any] = {
            "step_id": len(self.steps) + 1,
            "timestamp": _now(),
            "source": "agent",
            "model_name": result.model,
            "message": result.text,
            "metrics": {
                "prompt_tokens": result.usage.prompt_tokens,
                "completion_tokens": result.usage.completion_tokens,
                "cached_tokens": result.usage.cached_tokens,
                "cache_write_tokens": result.usage.cache_write_tokens,
                "reasoning_tokens": result.usage.reasoning_tokens,
                "cost_usd": result.cost_usd,
                "reasoning_cost_usd": result.reasoning_cost_usd,
                "prompt_token_ids": result.prompt_token_ids,
                "completion_token_ids": result.completion_token_ids,
                "logprobs": result.completion_logprobs,
            },
            "extra": {"finish_reason": result.finish_reason, "latency_sec": round(result.latency_sec, 4),
                      "policy_version": result.policy_version},
        }
        if result.reasoning:
            step["reasoning_content"] = result.reasoning
        calls = call if isinstance(call, list) else [call] if call is not None else []
        if calls:
            step["tool_calls"] = [{"tool_call_id": c.id, "function_name": c.name, "arguments": c.arguments}
                                  for c in calls]
        self.steps.append(step)
        return step

    @staticmethod
    def observe(step: dict[str, Any], call_id: str | None, content: str, **extra: Any) -> None:
        """Attach one result to ``step`` (a step with several calls gets one per call, in order)."""
        step.setdefault("observation", {"results": []})["results"].append(
            {"source_call_id": call_id, "content": content, "extra": extra or None})

    def compaction(self, record: dict[str, Any]) -> None:
        """A context compaction before the next agent step (:mod:`aes.agents.compaction`)."""
        self.data["extra"].setdefault("compactions", []).append({"before_step": len(self.steps) + 1, **record})

    def finish(self, **extra: Any) -> dict[str, Any]:
        agent_steps = [s for s in self.steps if s["source"] == "agent"]
        metrics = [s["metrics"] for s in agent_steps]
        self.data["final_metrics"] = {
            "total_prompt_tokens": sum(m["prompt_tokens"] for m in metrics),
            "total_completion_tokens": sum(m["completion_tokens"] for m in metrics),
            "total_cached_tokens": sum(m["cached_tokens"] for m in metrics),
            "total_cache_write_tokens": sum(m.get("cache_write_tokens", 0) for m in metrics),
            "total_reasoning_tokens": sum(m.get("reasoning_tokens", 0) for m in metrics),
            "total_cost_usd": sum(m["cost_usd"] for m in metrics),
            "total_steps": len(self.steps),
        }
        self.data["extra"].update(extra)
        return self.data


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so that a crash never leaves a half-written file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False))
    os.replace(tmp, path)
