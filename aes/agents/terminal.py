"""The terminal agent: one shell command per model turn in a container.

System prompt + task instruction; each turn the model runs one command (a ``bash`` tool
call, or a fenced block for models without tools) in one persistent bash session in the
container (``cd`` and variables persist, as in a terminal); the output
(truncated, with the exit code) comes back; the episode ends when the model says it is
done (``submit`` / DONE) or at the turn, token or time limit. Host-side tools (the
proposer's ``validate`` and ``solver_model``) plug in as :class:`HostTool`. Every episode
is recorded as an ATIF trajectory.

A reply with several native tool calls (a model allowed parallel calls, or a server that
ignores ``parallel_tool_calls: false``) has every call run, in order, each answered by its own
tool result, as both APIs require; a ``submit`` among them ends the episode after the calls
before it. A conversation that nears the model's context is compacted
(:mod:`aes.agents.compaction`).

A model that cannot be reached (:class:`~aes.models.ModelUnavailable`) does not end an
episode: it propagates out of :meth:`Episode.send` and :meth:`TerminalAgent.run`, so the
trial runner records an infrastructure failure instead of verifying an untouched container
as a reward of 0. Every other model error ends the episode as ``model_error``.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from aes.agents import prompts
from aes.agents.compaction import Output, compact
from aes.agents.compaction import approx_tokens as _approx_tokens
from aes.agents.trajectory import TrajectoryRecorder
from aes.config import AgentConfig
from aes.errors import InfrastructureError
from aes.models import BudgetExhausted, ChatModel, ChatResult, ModelError, ModelUnavailable, ToolCall, ToolSpec
from aes.sandbox import AgentRun, Container
from aes.sandbox.shell import ShellSession
from aes.tasks import Task

log = logging.getLogger(__name__)

BASH_TOOL = ToolSpec(
    name="bash",
    description="Run one shell command (bash) in the container and return its output and exit code.",
    parameters={"type": "object", "properties": {"command": {"type": "string", "description": "The command."}},
                "required": ["command"]},
)
SUBMIT_TOOL = ToolSpec(name="submit", description="Finish: the task is complete.")

_FENCE = re.compile(r"```(?:bash|sh|shell|console)?[ \t]*\n(.*?)```", re.DOTALL)
_TEXT_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*(?:</tool_call>|$)", re.DOTALL)
"""A tool call written as text in the reply (Qwen/Hermes layout), e.g. by a server started without a
tool parser: ``<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>``."""
_DONE = re.compile(r"^\s*(DONE|TASK COMPLETE)\s*[.!]?\s*$", re.IGNORECASE | re.MULTILINE)
MIN_REPLY_TOKENS = 64


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
    CONTAINER_STOPPED = "container_stopped"
    POLICY_SPAN = "policy_span"
    """The episode was carried across more policy updates than allowed (``flywheel.carry_max_updates``)."""


@dataclass
class HostTool:
    """A tool that runs on the host, not in the container (e.g. the proposer's ``validate``)."""

    spec: ToolSpec
    run: Callable[[dict[str, Any]], str]
    parse_args: Callable[[str], dict[str, Any]] = field(default=lambda rest: {})
    """Arguments from the rest of a fenced command line (``solver_model 3``)."""


@dataclass
class Action:
    """What one model reply asks for: a shell command, a host tool, done, or nothing usable."""

    command: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    done: bool = False
    call: ToolCall | None = None
    native: bool = False
    """The call came as a native tool call (not written as text): its result goes back as a tool message."""


def _call(name: str, arguments: dict[str, Any]) -> ToolCall:
    return ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=arguments)


def text_tool_calls(text: str) -> list[ToolCall]:
    """Tool calls written as text (``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``), in
    order; a block that is not such a JSON object is skipped."""
    calls = []
    for match in _TEXT_CALL.finditer(text or ""):
        try:
            data = json.loads(match.group(1))
        except ValueError:
            continue
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            continue
        args = data.get("arguments", data.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                continue
        if isinstance(args, dict):
            calls.append(_call(data["name"], args))
    return calls


def parse_action(result: ChatResult, host_tools: dict[str, HostTool] | None = None) -> Action:
    """The first tool call (native, else written as text in the reply) or fenced block; ``submit``
    or DONE ends the episode."""
    host_tools = host_tools or {}
    native = bool(result.tool_calls)
    for call in result.tool_calls or text_tool_calls(result.text):
        if call.name == "submit":
            return Action(done=True, call=call, native=native)
        if call.name in host_tools:
            return Action(tool=call.name, arguments=call.arguments, call=call, native=native)
        if call.name == "bash" and isinstance(call.arguments.get("command"), str):
            return Action(command=call.arguments["command"], call=call, native=native)
    match = _FENCE.search(result.text or "")
    if match and match.group(1).strip():
        command = match.group(1).strip()
        word, _, rest = command.partition(" ")
        if "\n" not in command and word == "submit":
            return Action(done=True, call=_call("submit", {}))
        if "\n" not in command and word in host_tools:
            args = host_tools[word].parse_args(rest.strip())
            return Action(tool=word, arguments=args, call=_call(word, args))
        return Action(command=command, call=_call("bash", {"command": command}))
    if _DONE.search(result.text or ""):
        return Action(done=True)
    return Action()


def truncate_middle(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"


class Episode:
    """One conversation of a model acting in a container; :meth:`send` may be called again
    with feedback to continue it (the proposer's revisions)."""

    def __init__(self, model: ChatModel, cfg: AgentConfig, container: Container, system: str,
                 host_tools: list[HostTool] | None = None, agent_name: str = "aes-terminal-agent",
                 max_policy_span: int | None = None, progress: str | None = None, user: str | None = None):
        self.model, self.cfg, self.container = model, cfg, container
        self.progress = progress
        """A label to log each turn under (the proposer's episodes); None: quiet (solver attempts)."""
        self.max_policy_span = max_policy_span
        """Most policy updates the episode may see after its first model call (None: no limit)."""
        self.first_version: int | None = None
        self.shell = ShellSession(container, user=user)
        """The agent's shell, as the task's ``[agent] user`` when it names one (else the image's USER)."""
        self.host_tools = {t.spec.name: t for t in host_tools or []}
        self.tools = ([BASH_TOOL, *(t.spec for t in self.host_tools.values()), SUBMIT_TOOL]
                      if self.uses_tools else None)
        self.recorder = TrajectoryRecorder(agent_name, model.config.model,
                                           [t.__dict__ for t in self.tools] if self.tools else None)
        self.messages: list[dict] = [{"role": "system", "content": system}]
        self.recorder.add_message("system", system)
        self.turns = self.tokens = 0
        self.error: str | None = None
        self.outputs: list[Output] = []
        """The tool outputs in :attr:`messages`, oldest first (what a compaction may drop)."""

    @property
    def uses_tools(self) -> bool:
        return bool(self.model.supports_tools and self.model.config.use_tools is not False)

    def send(self, message: str, deadline: float) -> str:
        """Add a user message and act until the model is done or a limit is hit; the end reason.

        Raises :class:`~aes.models.ModelUnavailable` when the model server cannot be reached:
        that is no end of the episode the agent could be scored on.
        """
        self.messages.append({"role": "user", "content": message})
        self.recorder.add_message("user", message)
        format_errors = 0
        context = _approx_tokens(self.messages)
        while self.cfg.max_turns is None or self.turns < self.cfg.max_turns:  # None: no turn limit
            if deadline - time.monotonic() <= 0:
                return EndReason.TIMEOUT
            context = self._compact(context)
            # the reply's reasoning (reasoning_tokens) comes on top of its max_tokens
            room = self.model.config.context_length - context - self.model.config.reasoning_tokens
            if room < MIN_REPLY_TOKENS:
                return EndReason.CONTEXT_LIMIT
            if self._span_exceeded():
                return EndReason.POLICY_SPAN
            started = time.monotonic()
            try:
                result = self.model.chat(self.messages, self.tools, deadline=deadline,
                                         max_tokens=min(self.model.config.max_tokens, room))
            except BudgetExhausted as exc:
                self.error = str(exc)
                return EndReason.BUDGET
            except ModelUnavailable as exc:
                self.error = str(exc)
                raise
            except ModelError as exc:
                self.error = str(exc)
                return EndReason.MODEL_ERROR
            self.turns += 1
            self.tokens += result.usage.total
            context = result.usage.context or context + 64
            action = parse_action(result, self.host_tools)
            parallel = self._parallel(result)
            step = self.recorder.add_agent_step(result, [call for call, _ in parallel] if parallel else action.call)
            self.messages.append(self._assistant_message(result, action, parallel))
            if parallel:
                format_errors = 0
                end, added = self._act_all(parallel, step, deadline)
                if end is not None:
                    return end
                step["extra"]["overhead_sec"] = round(time.monotonic() - started - result.latency_sec, 4)
                context += added
                if self.cfg.max_episode_tokens and self.tokens >= self.cfg.max_episode_tokens:
                    return EndReason.TOKEN_LIMIT
                continue
            if action.done:
                if action.call is not None:
                    self._observe(step, action, "submitted")
                return EndReason.DONE
            if action.command is None and action.tool is None:
                format_errors += 1
                self.recorder.observe(step, None, prompts.FORMAT_REMINDER)
                self.messages.append({"role": "user", "content": prompts.FORMAT_REMINDER})
                if self.progress:
                    reply = " ".join((result.text or "").split())
                    log.info("%s turn %d: no command in the reply (format error %d of %d): %s", self.progress,
                             self.turns, format_errors, self.cfg.max_format_errors,
                             repr(reply[:80]) if reply else "empty reply")
                if format_errors >= self.cfg.max_format_errors:
                    return EndReason.FORMAT_ERRORS
                continue
            format_errors = 0
            observation = self._act(action, step, deadline)
            if self.progress:
                what = action.tool or f"$ {action.command.splitlines()[0][:100]}"
                log.info("%s turn %d: %s -> %s", self.progress, self.turns, what,
                         (observation or "container stopped").splitlines()[0][:60])
            if observation is None:
                return EndReason.CONTAINER_STOPPED
            self.outputs.append(Output(len(self.messages) - 1, step["step_id"]))
            # Time of the turn outside the model: command round trip, parsing, recording.
            step["extra"]["overhead_sec"] = round(time.monotonic() - started - result.latency_sec, 4)
            context += _approx_tokens([{"content": observation}])
            if self.cfg.max_episode_tokens and self.tokens >= self.cfg.max_episode_tokens:
                return EndReason.TOKEN_LIMIT
        return EndReason.MAX_TURNS

    def _compact(self, context: int) -> int:
        """Compact the conversation when it nears the context (:mod:`aes.agents.compaction`); the
        estimated context after."""
        if self.cfg.compact_at is None:
            return context
        config = self.model.config
        context, record = compact(self.messages, self.outputs, context, config.max_tokens + config.reasoning_tokens,
                                  config.context_length, self.cfg.compact_at, self.cfg.compact_to,
                                  self.cfg.compact_keep)
        if record is not None:
            self.recorder.compaction(record)
            if self.progress:
                log.info("%s: context compacted before turn %d: outputs of steps %s dropped (~%d -> ~%d tokens)",
                         self.progress, self.turns + 1, record["dropped_outputs_of_steps"],
                         record["estimated_tokens_before"], record["estimated_tokens_after"])
        return context

    def _parallel(self, result: ChatResult) -> list[tuple[ToolCall, Action]] | None:
        """A reply's native tool calls, each with what it asks for, when it holds several."""
        if not self.uses_tools or len(result.tool_calls) < 2:
            return None
        return [(call, parse_action(ChatResult(text="", tool_calls=[call]), self.host_tools))
                for call in result.tool_calls]

    def _act_all(self, calls: list[tuple[ToolCall, Action]], step: dict, deadline: float) -> tuple[str | None, int]:
        """Run the calls of one reply in order, each answered by its own tool result; ``(end reason
        or None to go on, estimated tokens the results add)``. A submit ends the episode after the
        calls before it; a call that cannot run (or comes after the submit, or after the container
        stopped) is answered with why."""
        added, done, stopped = 0, False, False
        for call, action in calls:
            if done:
                observation = "not run: submit ended the episode before this call"
            elif stopped:
                observation = "not run: the container stopped before this call"
            elif action.done:
                self._observe(step, action, "submitted")
                done = True
                continue
            elif action.command is None and action.tool is None:
                observation = (f"not run: {call.name!r} with arguments {call.raw_arguments or call.arguments} is no "
                               f"call of a tool here (tools: {', '.join(t.name for t in self.tools or [])})")
            else:
                observation = self._act(action, step, deadline)  # answered there, also when the container stopped
                stopped = observation is None
                if not stopped:
                    self.outputs.append(Output(len(self.messages) - 1, step["step_id"]))
                    added += _approx_tokens([{"content": observation}])
                continue
            self.recorder.observe(step, call.id, observation)
            self.messages.append({"role": "tool", "tool_call_id": call.id, "content": observation})
            added += _approx_tokens([{"content": observation}])
        if self.progress:
            log.info("%s turn %d: %d tool calls in one reply, run in order", self.progress, self.turns, len(calls))
        return (EndReason.DONE if done else EndReason.CONTAINER_STOPPED if stopped else None), added

    def _span_exceeded(self) -> bool:
        version = getattr(self.model, "weights_version", None)
        if self.max_policy_span is None or version is None:
            return False
        if self.first_version is None:
            self.first_version = version
        return version - self.first_version > self.max_policy_span

    def _act(self, action: Action, step: dict, deadline: float) -> str | None:
        """Run the action and record what it showed; None when the container has stopped
        (nothing more can be done in it: the episode ends instead of spending turns)."""
        if action.tool is not None:
            observation = truncate_middle(self.host_tools[action.tool].run(action.arguments),
                                          self.cfg.observation_chars)
            self._observe(step, action, observation, tool=action.tool)
            return observation
        limit = min(self.cfg.command_timeout_sec, max(deadline - time.monotonic(), 0.1))
        out = self.shell.run(action.command, limit)
        status = "timed out" if out.timed_out else f"exit code {out.exit_code}"
        observation = f"[{status}]\n" + truncate_middle(out.output, self.cfg.observation_chars)
        self._observe(step, action, observation, exit_code=out.exit_code, timed_out=out.timed_out,
                      seconds=round(out.seconds, 4))
        if out.exit_code is None and not out.timed_out and not self._container_running():
            return None
        return observation

    def _container_running(self) -> bool:
        """False once the container has stopped. A shell that just died may be the first sign,
        before the engine has marked the container stopped, so look again for a moment."""
        for _ in range(5):
            if self.container.status()[0] != "running":
                return False
            time.sleep(0.2)
        return True

    def _observe(self, step: dict, action: Action, observation: str, **extra: Any) -> None:
        call_id = action.call.id if action.call else None
        self.recorder.observe(step, call_id, observation, **extra)
        if self.uses_tools and call_id and action.native:
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": observation})
        else:
            self.messages.append({"role": "user", "content": observation})

    def _assistant_message(self, result: ChatResult, action: Action,
                           parallel: list[tuple[ToolCall, Action]] | None = None) -> dict:
        message: dict[str, Any] = {"role": "assistant", "content": result.text or ""}
        if parallel:
            message["tool_calls"] = [call.__dict__ for call, _ in parallel]
        elif self.uses_tools and action.call is not None and any(c.id == action.call.id for c in result.tool_calls):
            message["tool_calls"] = [action.call.__dict__]
        if result.reasoning_blocks:  # signed reasoning the provider wants back with this turn
            message["reasoning_blocks"] = result.reasoning_blocks
        return message

    def trajectory(self, **extra: Any) -> dict:
        self.shell.close()
        return self.recorder.finish(turns=self.turns, error=self.error, fenced_mode=not self.uses_tools, **extra)


class TerminalAgent:
    """The solver harness: a :class:`~aes.sandbox.TrialAgent` driven by a chat model."""

    def __init__(self, model: ChatModel, cfg: AgentConfig, name: str | None = None, hints: str | None = None,
                 max_policy_span: int | None = None, hil: Any = None):
        self.model = model
        self.cfg = cfg
        self.name = name or model.config.name
        self.hints = hints
        self.max_policy_span = max_policy_span
        self.hil = hil
        """A human-in-the-loop setting (:class:`aes.hil.tool.HilAttempt`): its instruction and ``ask_human``."""

    def system_prompt(self, uses_tools: bool) -> str:
        if self.cfg.system_prompt:
            return self.cfg.system_prompt
        return prompts.TOOLS_SYSTEM if uses_tools else prompts.FENCED_SYSTEM

    def run(self, task: Task, container: Container, timeout: float) -> AgentRun:
        """Run one episode on ``task``; raises :class:`~aes.errors.InfrastructureError` (e.g. the
        model server went away) instead of returning a run that would be scored."""
        deadline = time.monotonic() + timeout
        uses_tools = bool(self.model.supports_tools and self.model.config.use_tools is not False)
        host_tools = list(self.hil.tools) if self.hil else []
        from aes.agents.toolboxes import attach_all  # MCP tools, action sets (aes/agents/toolboxes.py)
        boxes = attach_all(task, container, fenced=not uses_tools, call_timeout=self.cfg.command_timeout_sec,
                           reserved={t.spec.name for t in host_tools})
        for box in boxes.values():
            host_tools += box.tools
        episode = Episode(self.model, self.cfg, container, self.system_prompt(uses_tools),
                          host_tools=host_tools or None, max_policy_span=self.max_policy_span,
                          user=task.spec.agent_user)
        instruction = (self.hil.instruction if self.hil else task.instruction) + \
            "".join(box.help for box in boxes.values()) + (prompts.HINTS_HEADER + self.hints if self.hints else "")
        try:
            end = episode.send(instruction, deadline)
        except InfrastructureError:
            episode.shell.close()
            raise
        if end == EndReason.MAX_TURNS and time.monotonic() > deadline:
            end = EndReason.TIMEOUT
        versions = [v for v in (s["extra"].get("policy_version") for s in episode.recorder.steps
                                if s.get("source") == "agent") if v is not None]
        trajectory = episode.trajectory(end_reason=end, hints=bool(self.hints),
                                        policy_versions=[min(versions), max(versions)] if versions else None,
                                        **({"hil": self.hil.record()} if self.hil else {}),
                                        **{name: box.record(episode.recorder.steps) for name, box in boxes.items()})
        return AgentRun(exit_code=0, output=episode.error or "", timed_out=end == EndReason.TIMEOUT,
                        info={"trajectory": trajectory, "end_reason": end})
