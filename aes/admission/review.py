"""LLM review (admission check 6): a grader model checks the task against the rubric.

The rubric is the domain's (``admission.rubric`` with ``admission.domain_rubrics[domain]`` over
it: Harbor's task-review criteria, App. E.2's design rules, and what a domain changes, e.g. a
human-in-the-loop task's instruction withholds the details its ``blockers.json`` registers, on
purpose). The grader sees the task's files (the registry included, and what it is), the parent
task's instruction and tests when there is a parent (for the novelty criterion), and answers
with one JSON object ``{"criteria": [{"name": ..., "pass": true|false, "reason": ...}]}``.
Every rubric criterion must be present and pass; a rejection names the criterion
(``review.<name>``) and what it requires. An unreadable reply is retried once and then rejects
the task with its own reason code.

The request sets no sampling parameters of its own: the grader samples as its model config says
(a setting the model rejects, e.g. a reasoning model's temperature, is in its ``unsupported_params``
and never sent), and its ``reasoning_tokens`` come on top of ``admission.review_max_tokens``, so
the verdict's budget is not eaten by reasoning.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from aes.config import AdmissionConfig
from aes.models import ChatModel, ModelError, ModelUnavailable
from aes.tasks import Reason
from aes.tasks.task import read_capped

SYSTEM = (
    "You review training tasks for terminal agents. Each task is a directory: instruction.md (what "
    "the agent is told), task.toml, environment/ (the container the agent works in), solution/solve.sh "
    "(a reference solution, hidden from the agent) and tests/ (the verifier, hidden from the agent). "
    "The reward is the fraction of tests that pass. "
    "Judge each criterion strictly but fairly. Reply with one JSON object and nothing else."
)
HIL = (
    "This is a human-in-the-loop task: blockers.json (never shown to the agent) registers details that "
    "instruction.md withholds on purpose; the agent can ask a simulated human for them, and "
    "solution/answers.json holds their answers. A registered detail missing from the instruction is the "
    "design, not a defect; judge what the instruction must state against what is not registered."
)
PARENT_FILES = ("instruction.md", "tests/test_outputs.py")
"""What of the parent task the grader sees for the novelty criterion."""
_SKIP_DIRS = {"__pycache__", ".git"}


@dataclass
class ReviewResult:
    passed: bool
    reasons: list[Reason] = field(default_factory=list)
    criteria: list[dict] = field(default_factory=list)
    tokens: int = 0
    cost_usd: float = 0.0


def render_task(task_dir: Path, file_chars: int) -> str:
    """The task's text files, each truncated, as one document for a model.

    No file is read past what is shown (``4 * file_chars`` bytes at most: a proposal's file
    may be huge or sparse); a larger file's note gives its size in bytes."""
    parts = []
    for path in sorted(p for p in task_dir.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = path.relative_to(task_dir)
        if any(part in _SKIP_DIRS for part in rel.parts):
            continue
        try:
            data, size = read_capped(path, 4 * file_chars + 4)
        except OSError:
            continue
        if b"\0" in data[:4096]:
            parts.append(f"--- {rel} (binary, {size} bytes) ---")
            continue
        text = data.decode("utf-8", errors="replace")
        if len(text) > file_chars or size > len(data):
            rest = (f"{len(text) - file_chars} more characters" if size == len(data)
                    else f"{size} bytes in all")
            text = text[:file_chars] + f"\n[... {rest} ...]"
        parts.append(f"--- {rel} ---\n{text}")
    return "\n\n".join(parts)


def parse_verdict(text: str) -> list[dict] | None:
    """The ``criteria`` list of the first JSON object in ``text``; None if there is none."""
    for match in re.finditer(r"\{", text or ""):
        try:
            value, _ = json.JSONDecoder().raw_decode(text[match.start():])
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("criteria"), list):
            return [c for c in value["criteria"] if isinstance(c, dict)]
    return None


def render_parent(parent_dir: Path, file_chars: int) -> str:
    """The parent task's instruction and tests, for the novelty criterion."""
    parts = []
    for rel in PARENT_FILES:
        path = parent_dir / rel
        if path.is_file() and not path.is_symlink():
            data, size = read_capped(path, 4 * file_chars + 4)
            text = data.decode("utf-8", errors="replace")[:file_chars]
            parts.append(f"--- parent {rel} ---\n{text}" + ("\n[...]" if size > len(text) else ""))
    return "\n\n".join(parts)


class Reviewer:
    def __init__(self, grader: ChatModel, cfg: AdmissionConfig, domain: str = "terminal"):
        self.grader = grader
        self.cfg = cfg
        self.rubric = cfg.rubric_for(domain)
        """The criteria of ``domain``'s tasks (:meth:`AdmissionConfig.rubric_for`)."""

    def system(self, task_dir: Path) -> str:
        return SYSTEM + (" " + HIL if (task_dir / "blockers.json").is_file() else "")

    def prompt(self, task_dir: Path, parent_dir: Path | None = None) -> str:
        rubric = "\n".join(f"- {c.name}: {c.requirement}" for c in self.rubric)
        names = ", ".join(f'"{c.name}"' for c in self.rubric)
        parent = render_parent(parent_dir, self.cfg.review_file_chars // 2) if parent_dir is not None else ""
        return (f"Criteria:\n{rubric}\n\nTask files:\n\n{render_task(task_dir, self.cfg.review_file_chars)}\n\n"
                + (f"The parent task this one was built from (for the novelty criterion):\n\n{parent}\n\n"
                   if parent else "No parent task is shown.\n\n")
                + f'Answer with {{"criteria": [{{"name": ..., "pass": true or false, "reason": "one sentence"}}]}} '
                f"with one entry for each of {names}.")

    def review(self, task_dir: Path, parent_dir: Path | None = None) -> ReviewResult:
        messages = [{"role": "system", "content": self.system(task_dir)},
                    {"role": "user", "content": self.prompt(task_dir, parent_dir)}]
        result = ReviewResult(passed=False)
        for _ in range(2):
            try:
                reply = self.grader.chat(messages, max_tokens=self.cfg.review_max_tokens)
            except ModelUnavailable:
                raise  # the grader's server is down: an infrastructure failure, not a rejected task
            except ModelError as exc:
                result.reasons = [Reason("review.grader_error", f"the reviewer model failed: {exc}")]
                return result
            result.tokens += reply.usage.total
            result.cost_usd += reply.cost_usd
            criteria = parse_verdict(reply.text)
            if criteria is not None:
                return self._judge(criteria, result)
        result.reasons = [Reason("review.unparseable",
                                 "the reviewer's reply held no JSON verdict (twice); the task was not reviewed")]
        return result

    def _judge(self, criteria: list[dict], result: ReviewResult) -> ReviewResult:
        by_name = {str(c.get("name")): c for c in criteria}
        result.criteria = criteria
        for criterion in self.rubric:
            verdict = by_name.get(criterion.name)
            if verdict is None:
                result.reasons.append(Reason(f"review.{criterion.name}", "the reviewer gave no verdict"))
            elif verdict.get("pass") is not True:
                result.reasons.append(Reason(f"review.{criterion.name}",
                                             f"{verdict.get('reason') or 'failed'} (the criterion: {criterion.requirement})"))
        result.passed = not result.reasons
        return result
