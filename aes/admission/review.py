"""LLM review (admission check 6): a grader model checks the task against the rubric.

The grader sees the task's files and answers with one JSON object
``{"criteria": [{"name": ..., "pass": true|false, "reason": ...}]}``. Every rubric
criterion must be present and pass; an unreadable reply is retried once and then
rejects the task with its own reason code.
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
    "Judge each criterion strictly but fairly. Reply with one JSON object and nothing else."
)
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


class Reviewer:
    def __init__(self, grader: ChatModel, cfg: AdmissionConfig):
        self.grader = grader
        self.cfg = cfg

    def prompt(self, task_dir: Path) -> str:
        rubric = "\n".join(f"- {c.name}: {c.requirement}" for c in self.cfg.rubric)
        names = ", ".join(f'"{c.name}"' for c in self.cfg.rubric)
        return (f"Criteria:\n{rubric}\n\nTask files:\n\n{render_task(task_dir, self.cfg.review_file_chars)}\n\n"
                f'Answer with {{"criteria": [{{"name": ..., "pass": true or false, "reason": "one sentence"}}]}} '
                f"with one entry for each of {names}.")

    def review(self, task_dir: Path) -> ReviewResult:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": self.prompt(task_dir)}]
        result = ReviewResult(passed=False)
        for _ in range(2):
            try:
                reply = self.grader.chat(messages, max_tokens=self.cfg.review_max_tokens, temperature=0.0)
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
        for criterion in self.cfg.rubric:
            verdict = by_name.get(criterion.name)
            if verdict is None:
                result.reasons.append(Reason(f"review.{criterion.name}", "the reviewer gave no verdict"))
            elif verdict.get("pass") is not True:
                result.reasons.append(Reason(f"review.{criterion.name}", str(verdict.get("reason") or "failed")))
        result.passed = not result.reasons
        return result
