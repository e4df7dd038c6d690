"""The terminal agent: one shell command per model turn in the task's container.

System prompt + task instruction; each turn the model runs one command (a ``bash`` tool
call, or a fenced block for models without tools); the output (truncated, with the exit
code) comes back; the episode ends when the model says it is done or at the turn, token
or time limit. Every episode is recorded as an ATIF trajectory.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass

from aes.agents import prompts
from aes.agents.trajectory import TrajectoryRecorder
from aes.config import AgentConfig
from aes.models import BudgetExhausted, ChatModel, ChatResult, ModelError, ToolCall, ToolSpec
from aes.sandbox import AgentRun, Container
from aes.tasks import Task

BASH_TOOL = ToolSpec(
    name="bash",
    description="Run one shell command (bash) in the task's container and return its output and exit code.",
    parameters={"type": "object", "properties": {"command": {"type": "string", "description": "The command."}},
                "required": ["command"]},
)
SUBMIT_TOOL = ToolSpec(name="submit", description="Finish: the task is complete.")

_FENCE = re.compile(r"```(?:bash|sh|shell|console)?[ \t]*\n(.*?)```", re.DOTALL)
_DONE = re.compile(r"^\s*(DONE|TASK COMPLETE)\s*[.!]?\s*$", re.IGNORECASE | re.MULTILINE)


class EndReason:
    """Why an episode ended (recorded in the trajectory)."""

    DONE = "done"
    MAX_TURNS = "max_turns"
    TIMEOUT = "timeout"
    TOKEN_LIMIT = "token_limit"
    CONTEXT_LIMIT = "context_limit"
    FORMAT_ERRORS = "format_errors"
    MODEL_ERROR = "model_error"
    BUDGET = "budget_exhausted"


@dataclass
class Action:
    """What one model reply asks for: a command, done, or nothing usable."""

    command: str | None = None
    done: bool = False
    call: ToolCall | None = None


def parse_action(result: ChatResult) -> Action:
    """The first bash tool call or fenced block; ``submit`` or DONE ends the episode."""
    for call in result.tool_calls:
        if call.name == "submit":
            return Action(done=True, call=call)
        if call.name == "bash" and isinstance(call.arguments.get("command"), str):
            return Action(command=call.arguments["command"], call=call)
    match = _FENCE.search(result.text or "")
    if match and match.group(1).strip():
        command = match.group(1).strip()
        return Action(command=command, call=ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name="bash",
                                                      arguments={"command": command}))
    if _DONE.search(result.text or ""):
        return Action(done=True)
    return Action()


MIN_REPLY_TOKENS = 64


def _approx_tokens(messages: list[dict]) -> int:
    """A generous token estimate (3 characters per token plus per-message overhead)."""
    return sum(len(str(m.get("content") or "")) // 3 + 8 for m in messages)


def truncate_middle(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"


class TerminalAgent:
    """A :class:`~aes.sandbox.TrialAgent` driven by a chat model."""

    def __init__(self, model: ChatModel, cfg: AgentConfig, name: str | None = None,
                 hints: str | None = None):
        self.model = model
        self.cfg = cfg
        self.name = name or model.config.name
        self.hints = hints

    @property
    def uses_tools(self) -> bool:
        return bool(self.model.supports_tools and self.model.config.use_tools is not False)

    def system_prompt(self) -> str:
        if self.cfg.system_prompt:
            return self.cfg.system_prompt
        return prompts.TOOLS_SYSTEM if self.uses_tools else prompts.FENCED_SYSTEM

    def run(self, task: Task, container: Container, timeout: float) -> AgentRun:
        deadline = time.monotonic() + timeout
        tools = [BASH_TOOL, SUBMIT_TOOL] if self.uses_tools else None
        recorder = TrajectoryRecorder("aes-terminal-agent", self.model.config.model,
                                      [t.__dict__ for t in tools] if tools else None)
        instruction = task.instruction + (prompts.HINTS_HEADER + self.hints if self.hints else "")
        messages = [{"role": "system", "content": self.system_prompt()},
                    {"role": "user", "content": instruction}]
        recorder.add_message("system", messages[0]["content"])
        recorder.add_message("user", instruction)
        end, error, tokens, format_errors, turns = EndReason.MAX_TURNS, None, 0, 0, 0
        context = _approx_tokens(messages)
        for turns in range(1, self.cfg.max_turns + 1):
            if deadline - time.monotonic() <= 0:
                end = EndReason.TIMEOUT
                break
            room = self.model.config.context_length - context
            if room < MIN_REPLY_TOKENS:
                end = EndReason.CONTEXT_LIMIT
                break
            try:
                result = self.model.chat(messages, tools, max_tokens=min(self.model.config.max_tokens, room))
            except BudgetExhausted as exc:
                end, error = EndReason.BUDGET, str(exc)
                break
            except ModelError as exc:
                end, error = EndReason.MODEL_ERROR, str(exc)
                break
            tokens += result.usage.total
            context = result.usage.total or context + _approx_tokens(messages[-1:])
            action = parse_action(result)
            step = recorder.add_agent_step(result, action.call)
            messages.append(self._assistant_message(result, action))
            if action.done:
                end = EndReason.DONE
                if action.call is not None:
                    recorder.observe(step, action.call.id, "submitted")
                break
            if action.command is None:
                format_errors += 1
                recorder.observe(step, None, prompts.FORMAT_REMINDER)
                messages.append({"role": "user", "content": prompts.FORMAT_REMINDER})
                context += _approx_tokens(messages[-1:])
                if format_errors >= self.cfg.max_format_errors:
                    end = EndReason.FORMAT_ERRORS
                    break
                continue
            format_errors = 0
            limit = min(self.cfg.command_timeout_sec, max(deadline - time.monotonic(), 0.1))
            out = container.exec(action.command, limit)
            status = "timed out" if out.timed_out else f"exit code {out.exit_code}"
            observation = f"[{status}]\n" + truncate_middle(out.output, self.cfg.observation_chars)
            recorder.observe(step, action.call.id if action.call else None, observation,
                             exit_code=out.exit_code, timed_out=out.timed_out,
                             seconds=round(out.seconds, 4))
            messages.append(self._observation_message(action, observation))
            context += _approx_tokens(messages[-1:])
            if self.cfg.max_episode_tokens and tokens >= self.cfg.max_episode_tokens:
                end = EndReason.TOKEN_LIMIT
                break
        else:
            end = EndReason.MAX_TURNS
        if time.monotonic() > deadline and end == EndReason.MAX_TURNS:
            end = EndReason.TIMEOUT
        trajectory = recorder.finish(end_reason=end, error=error, turns=turns,
                                     fenced_mode=not self.uses_tools, hints=bool(self.hints))
        return AgentRun(exit_code=0, output=error or "", timed_out=end == EndReason.TIMEOUT,
                        info={"trajectory": trajectory, "end_reason": end})

    def _assistant_message(self, result: ChatResult, action: Action) -> dict:
        message = {"role": "assistant", "content": result.text or ""}
        if self.uses_tools and result.tool_calls:
            used = [c for c in result.tool_calls if action.call is not None and c.id == action.call.id]
            message["tool_calls"] = [c.__dict__ for c in used]
        return message

    def _observation_message(self, action: Action, observation: str) -> dict:
        if self.uses_tools and action.call is not None and action.call.id:
            return {"role": "tool", "tool_call_id": action.call.id, "content": observation}
        return {"role": "user", "content": observation}
