"""Proposer harnesses that work by generation (paper §4.1): ``prompt`` and ``prompt_feedback``.

``prompt``: the model writes every file of the task in one reply; nothing is executed.
``prompt_feedback``: as ``prompt``, then the draft is built and run (oracle, no-op) and the
logs go back to the model for up to ``harness.feedback_rounds`` rewrites; a reply that gave no
draft (no blocks, or cut off) is such a round too, told why.
Both keep the conversation, so admission feedback continues it (:meth:`revise`).
Both keep to the episode's budget (``harness.episode_timeout_sec``, as the terminal harness does):
no model call starts once it is spent, so an episode ends within the budget plus one call.
A reply is read as far as it can be (:func:`~aes.proposer.files.parse_reply`): blocks outside
the task layout are left out, a block cut at ``max_tokens`` is lost, kit files are copied in by
reference; what was left out is said at the top of the next message the model gets (and in the
trajectory's ``note``).
A model that cannot be reached raises :class:`~aes.models.ModelUnavailable` out of the
episode (no draft is not the proposer's failure then); other model errors mean no draft.
"""

from __future__ import annotations

import time
from pathlib import Path

from aes.agents import TrajectoryRecorder
from aes.config import HarnessConfig
from aes.models import ChatModel, ModelError, ModelUnavailable
from aes.proposer.assignments import Assignment
from aes.proposer.files import FORMAT_HELP, DraftError, parse_reply, render_files, write_files
from aes.proposer.tools import ProposerTools
from aes.proposer.workspace import Workspace, trajectory_digest

ORDER = ("workflow.md", "task_format.md", "what_to_build.md", "reward_spread.md", "admission.md")
"""The instructions in the system prompt: how this harness works first, the rest after these."""


def system_prompt(workspace: Workspace) -> str:
    docs = [p for p in (workspace.root / "instructions").glob("*.md") if p.name != "ASSIGNMENT.md"]
    docs.sort(key=lambda p: (ORDER.index(p.name) if p.name in ORDER else len(ORDER), p.name))
    return "\n\n".join(p.read_text() for p in docs)


def context_message(assignment: Assignment, workspace: Workspace, max_chars: int) -> str:
    """Everything a harness without a shell gets to see, in one message: the assignment, the parent's
    files (its instruction and tests first, then the rest as they fit), the solver's attempts, notes."""
    parent = workspace.root / "past_environments" / assignment.parent_env_id
    runs = sorted((workspace.root / "past_trajectories" / assignment.parent_env_id / assignment.solver).glob("*.json"))
    digests = "\n\n".join(trajectory_digest(p, max_chars // 10) for p in runs[:4]) or "(none recorded)"
    notes = (workspace.memory / "notes.md").read_text() if (workspace.memory / "notes.md").exists() else ""
    brief = (workspace.root / "instructions" / "ASSIGNMENT.md").read_text()
    kit_dir = workspace.root / "instructions" / "kit"
    kit = sorted(p.name for p in kit_dir.glob("*") if p.is_file())
    return (f"{brief}\n## Parent task files\n{render_files(parent, max_chars // 2, kit_dir)}\n"
            f"## The solver's attempts on the parent\n{digests}\n\n## Your notes from earlier rounds\n"
            f"{notes[: max_chars // 8]}\n\n## Output\n{FORMAT_HELP}\n"
            + (f"Kit files you can reference: {', '.join(kit)}.\n" if kit else "")
            + "Write the complete new task now.")


class PromptHarness:
    """One generation writes the task; revisions rewrite it from the feedback."""

    name = "prompt"

    def __init__(self, model: ChatModel, cfg: HarnessConfig, tools: ProposerTools):
        self.model, self.cfg, self.tools = model, cfg, tools
        self.messages: list[dict] = []
        self.recorder: TrajectoryRecorder | None = None
        self.workspace: Workspace | None = None
        self.tokens, self.cost_usd, self.note = 0, 0.0, ""
        self.pending: list[str] = []
        """What the last reply lost (blocks left out, a file cut off), told with the next message."""
        self.deadline = 0.0

    def start(self, assignment: Assignment, workspace: Workspace) -> Path | None:
        self.workspace = workspace
        self.deadline = time.monotonic() + self.cfg.episode_timeout_sec
        self.recorder = TrajectoryRecorder(f"aes-proposer-{self.name}", self.model.config.model)
        system = system_prompt(workspace)
        self.messages = [{"role": "system", "content": system}]
        self.recorder.add_message("system", system)
        return self._generate(context_message(assignment, workspace, self.cfg.context_chars))

    def revise(self, feedback: str) -> Path | None:
        return self._generate(f"{feedback}\n\nRewrite the task to fix this. {FORMAT_HELP}")

    def _generate(self, message: str) -> Path | None:
        assert self.recorder is not None and self.workspace is not None
        if time.monotonic() >= self.deadline:
            self.note = f"the episode's budget is spent (harness.episode_timeout_sec = {self.cfg.episode_timeout_sec:g} s)"
            return None
        if self.pending:  # what the last reply lost, said first
            message = "About your last reply: " + "; ".join(self.pending) + ".\n\n" + message
            self.pending = []
        self.messages.append({"role": "user", "content": message})
        self.recorder.add_message("user", message)
        try:
            result = self.model.chat(self.messages, deadline=self.deadline)  # cut at the budget's end
        except ModelUnavailable:
            raise
        except ModelError as exc:
            self.note = f"model call failed: {exc}"
            return None
        self.tokens += result.usage.total
        self.cost_usd += result.cost_usd
        self.recorder.add_agent_step(result, None)
        self.messages.append({"role": "assistant", "content": result.text})
        kit_dir = self.workspace.root / "instructions" / "kit"
        try:
            reply = parse_reply(result.text, result.finish_reason, {p.name for p in kit_dir.glob("*") if p.is_file()})
        except DraftError as exc:
            self.note = str(exc)
            return None
        self.pending = list(reply.notes)
        if not reply.files and not reply.kits:
            self.note = "; ".join(["the reply held no <file> blocks", *reply.notes])
            return None
        self.note = "; ".join(reply.notes)
        draft = self.workspace.new_draft_dir()
        write_files(reply.files, draft, reply.kits, kit_dir)
        return draft

    def trajectory(self, **extra) -> dict:
        assert self.recorder is not None
        return self.recorder.finish(harness=self.name, note=self.note, **extra)

    def close(self) -> None:
        pass


class PromptFeedbackHarness(PromptHarness):
    """Generate, build and run the draft, feed the logs back, rewrite (up to feedback_rounds)."""

    name = "prompt_feedback"

    def _generate(self, message: str) -> Path | None:
        draft = super()._generate(message)
        for _ in range(self.cfg.feedback_rounds):
            if draft is None:  # a reply without a task is a round too: the model is told why
                draft = super()._generate(f"Your reply gave no task: {self.note or 'no file blocks'}.\n\n"
                                          f"Write the complete task. {FORMAT_HELP}")
                continue
            summary, valid = self.tools.validate(draft, full=False)
            if valid or time.monotonic() >= self.deadline:  # a spent budget hands in the draft as it is
                return draft
            draft = super()._generate(f"I built and ran your draft:\n{summary}\n\nFix it. {FORMAT_HELP}")
        return draft
