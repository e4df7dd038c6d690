"""The ``terminal`` proposer harness (paper §4.1): an agent in its own sandbox container.

The workspace is mounted at ``/workspace`` (instructions, past trajectories and past
environments read-only; memory/, tools/ and the drafts writable). There is no Docker
socket inside: building and running the draft happens on the host through the
``validate`` and ``solver_model`` tools; ``submit`` ends the episode. Web access is off
(the container has no network) unless ``harness.web_access`` is set.
"""

from __future__ import annotations

import time
from pathlib import Path

from aes.agents import Episode, EndReason
from aes.config import AgentConfig, HarnessConfig
from aes.models import ChatModel
from aes.proposer.assignments import Assignment
from aes.proposer.tools import ProposerTools
from aes.proposer.workspace import READ_ONLY, Workspace
from aes.sandbox import Container, DockerSandbox
from aes.sandbox.engine import SHUTDOWN_GRACE_SEC
from aes.sandbox.shell import ShellSession

SYSTEM = """\
You build training tasks for a terminal agent. You work in a Linux container; your workspace is
/workspace. Read /workspace/instructions/ first: workflow.md (how you work here, your tools),
task_format.md (how a valid task looks), what_to_build.md, reward_spread.md (how to design a task
the solver learns from), admission.md (every check and number) and ASSIGNMENT.md (your assignment).
The parent task is under /workspace/past_environments/, the solver's attempts under
/workspace/past_trajectories/. Write your task into a new directory /workspace/env_001/ (env_002/
for a second draft), check it with `validate`, and `submit` when it is ready."""

FENCED_TOOLS = """
You have no function calling: reply each turn with one command in a ```bash fenced block.
The tools are commands of their own: a block holding just `validate env_001`, `solver_model env_001 2`
(where workflow.md lists it) or `submit` calls them."""


RESTARTED = """\
Your container was replaced: the Docker engine restarted. Everything under /workspace is kept;
processes, and files outside /workspace, are gone. Go on where you were."""


class TerminalHarness:
    name = "terminal"

    def __init__(self, model: ChatModel, cfg: HarnessConfig, agent_cfg: AgentConfig, tools: ProposerTools,
                 sandbox: DockerSandbox, image: str):
        self.model, self.cfg, self.tools = model, cfg, tools
        self.agent_cfg = AgentConfig(**{**agent_cfg.__dict__, "max_turns": cfg.max_turns, "system_prompt": None})
        self.sandbox, self.image = sandbox, image
        self.container: Container | None = None
        self.episode: Episode | None = None
        self.workspace: Workspace | None = None
        self.label = ""
        self.deadline = 0.0
        self.note = ""
        self.end_reasons: list[str] = []
        self.tool_tokens, self.tool_cost_usd = 0, 0.0
        """What the tools spent on models for this episode (the review inside ``validate``)."""

    def _spend(self, tokens: int, usd: float) -> None:
        self.tool_tokens += tokens
        self.tool_cost_usd += usd

    @property
    def tokens(self) -> int:
        return (self.episode.tokens if self.episode else 0) + self.tool_tokens

    @property
    def cost_usd(self) -> float:
        if not self.episode:
            return self.tool_cost_usd
        return self.tool_cost_usd + sum(s["metrics"]["cost_usd"] for s in self.episode.recorder.steps
                                        if s["source"] == "agent")

    def _mounts(self, workspace: Workspace) -> dict[str, tuple[str, str]]:
        mounts = {str(workspace.root): ("/workspace", "rw"),
                  str(workspace.memory): ("/workspace/memory", "rw"),
                  str(workspace.tools): ("/workspace/tools", "rw")}
        if workspace.skills is not None:
            mounts[str(workspace.skills)] = ("/workspace/skills", "rw")
        for name in READ_ONLY:
            mounts[str(workspace.root / name)] = (f"/workspace/{name}", "ro")
        return mounts

    def start(self, assignment: Assignment, workspace: Workspace) -> Path | None:
        self.workspace, self.label = workspace, assignment.assignment_id
        self.deadline = time.monotonic() + self.cfg.episode_timeout_sec
        self.container = self._container()
        system = SYSTEM + ("" if self.model.supports_tools and self.model.config.use_tools is not False
                           else FENCED_TOOLS)
        parent = workspace.root / "past_environments" / assignment.parent_env_id
        tools = self.tools.host_tools(workspace, self.cfg.solver_feedback, self._spend,
                                      parent if parent.is_dir() else None)
        self.episode = Episode(self.model, self.agent_cfg, self.container, system, tools,
                               agent_name="aes-proposer-terminal", progress=assignment.assignment_id)
        brief = (workspace.root / "instructions" / "ASSIGNMENT.md").read_text()
        return self._run(brief + "\nStart by reading /workspace/instructions/.")

    def _container(self) -> Container:
        assert self.workspace is not None
        return self.sandbox.run_container(
            self.image, cpus=self.cfg.cpus, memory_mb=self.cfg.memory_mb,
            network="bridge" if self.cfg.web_access else "none", workdir="/workspace",
            mounts=self._mounts(self.workspace), role="proposer", label=self.label)

    def _send(self, message: str) -> str:
        """Continue the episode; when the Docker engine goes away under it, wait for the engine,
        start a new container on the same workspace (a host mount: drafts and memory are kept)
        and go on, up to ``sandbox.engine_retries`` times."""
        assert self.episode is not None
        episode, pending = self.episode, [message]

        def renew() -> None:
            self.close()
            self.container = episode.container = self._container()
            episode.shell = ShellSession(self.container)
            pending[0] = RESTARTED

        end, _ = self.sandbox.through_restarts(
            f"proposer episode {self.label}", lambda: episode.send(pending[0], self.deadline),
            lambda end: SHUTDOWN_GRACE_SEC if end == EndReason.CONTAINER_STOPPED else None, renew)
        return end

    def revise(self, feedback: str) -> Path | None:
        return self._run(f"{feedback}\n\nFix the task in a new draft directory, validate it, and submit again.")

    def _run(self, message: str) -> Path | None:
        assert self.episode is not None and self.workspace is not None
        end = self._send(message)
        self.end_reasons.append(end)
        draft = self.workspace.latest_draft()
        if end != EndReason.DONE:
            self.note = f"episode ended without submit ({end})"
        if draft is None:
            self.note = f"no draft with a task.toml in the workspace ({end})"
        return draft

    def trajectory(self, **extra) -> dict:
        assert self.episode is not None
        return self.episode.trajectory(harness=self.name, note=self.note, end_reasons=self.end_reasons, **extra)

    def close(self) -> None:
        if self.container is not None:
            self.container.remove()
            self.container = None
