"""``ask_human``: the solver's tool in the ask_human setting, and the per-attempt HiL setup."""

from __future__ import annotations

from dataclasses import dataclass, field

from aes.agents.terminal import HostTool
from aes.hil.blockers import Blocker, BlockerError, is_hil_task, load_blockers
from aes.hil.human import MAX_BLOCKERS_PER_QUESTION, Judge, SimulatedHuman
from aes.hil.metrics import ask_scores
from aes.hil.settings import has_tool, instruction_for
from aes.models import ToolSpec

ASK_SPEC = ToolSpec(
    name="ask_human",
    description="Ask the person who gave you the task one question about something the task does not say. "
                "Ask only when you cannot proceed without the answer.",
    parameters={"type": "object", "properties": {"question": {"type": "string", "description": "Your question."}},
                "required": ["question"]},
)
FENCED_HELP = ("\nYou can also ask the person who gave you this task a question about something it does not say: "
               "reply with a fenced block holding `ask_human <your question>` on one line. Ask only when you "
               "cannot proceed without the answer.")


@dataclass
class HilAttempt:
    """One attempt's HiL setting: its instruction, its tools and (with the tool) the human."""

    setting: str
    instruction: str
    blockers: list[Blocker]
    human: SimulatedHuman | None = None
    tools: list[HostTool] = field(default_factory=list)

    def record(self) -> dict:
        """What goes into the trajectory: the setting, every question with its match and reply, the scores."""
        log = self.human.log if self.human else []
        return {"setting": self.setting, "asked": log, **ask_scores(log, len(self.blockers))}


@dataclass(frozen=True)
class HilRun:
    """How a run's solver attempts meet human-in-the-loop tasks (``hil.*``)."""

    setting: str
    judge: Judge
    shaped_reward_weight: float = 0.0
    """The DPPO advantage's reward: task reward + this x Ask-F1 (``extra.reward_shaped``)."""
    max_blockers_per_question: int = MAX_BLOCKERS_PER_QUESTION

    def attempt(self, task) -> HilAttempt | None:
        return hil_attempt(task, self.setting, self.judge, self.max_blockers_per_question)

    def error(self, task) -> str | None:
        """Why no attempt at ``task`` can run in this setting (its registry does not load); None: it can."""
        if not is_hil_task(task.path):
            return None
        try:
            load_blockers(task.path)
        except BlockerError as exc:
            return f"{exc.code}: {exc}"
        return None


def hil_attempt(task, setting: str, judge: Judge,
                max_blockers_per_question: int = MAX_BLOCKERS_PER_QUESTION) -> HilAttempt | None:
    """The HiL setup of an attempt at ``task`` (None: not a HiL task)."""
    if not is_hil_task(task.path):
        return None
    blockers = load_blockers(task.path)
    attempt = HilAttempt(setting, instruction_for(setting, task.instruction, blockers), blockers)
    if has_tool(setting):
        human = SimulatedHuman(blockers, judge, max_blockers_per_question)
        attempt.human = human
        attempt.tools = [HostTool(ASK_SPEC, lambda args: human.ask(str(args.get("question", ""))),
                                  lambda rest: {"question": rest})]
        attempt.instruction += FENCED_HELP
    return attempt
