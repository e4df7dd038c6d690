"""The simulated human behind ``ask_human``: it answers questions about withheld details.

A judge decides which blockers a question asks about; the human replies with those blockers'
answers, or with a neutral line when it asks about none. Two judges: :class:`ModelJudge` (any
configured chat model, with the domain's judge prompt: the default wherever a model other than the
solver is configured) and :class:`KeywordJudge` (deterministic: a question asks about a blocker
when it names every word of one of its keywords, :mod:`aes.hil.cues` - for offline tests and the
embedded CPU run). A question about more than ``hil.max_blockers_per_question`` blockers is too
broad and reveals none, whichever judge found them: naming every topic in one question does not
pay. Every question, what it matched, what it revealed for the first time, and the reply are kept
(:attr:`SimulatedHuman.log`) and go into the ATIF trajectory: a question that reveals nothing new
(asked again about a blocker already answered) counts against precision.
"""

from __future__ import annotations

import json
import re
from typing import Protocol

from aes.hil.blockers import Blocker
from aes.hil.cues import asks_about

NEUTRAL = "That is not something I can help with."
MAX_BLOCKERS_PER_QUESTION = 2
"""A question about more blockers than this reveals none (``hil.max_blockers_per_question``)."""


class Judge(Protocol):
    def match(self, question: str, blockers: list[Blocker]) -> list[str]: ...


class KeywordJudge:
    """A question asks about a blocker when it names every word of one of its keywords (any order)."""

    def match(self, question: str, blockers: list[Blocker]) -> list[str]:
        return [blocker.id for blocker in blockers if asks_about(question, blocker.keywords)]


class ModelJudge:
    """A chat model decides, from ids, topics and keywords (never the answers), which blockers a
    question asks about; a reply that is not a JSON list of known ids counts as none."""

    def __init__(self, model, prompt: str):
        self.model, self.prompt = model, prompt

    def match(self, question: str, blockers: list[Blocker]) -> list[str]:
        registry = json.dumps([b.public() for b in blockers], indent=1)
        messages = [{"role": "system", "content": self.prompt},
                    {"role": "user", "content": f"Blockers:\n{registry}\n\nQuestion:\n{question}\n\n"
                                                "Reply with a JSON list of the blocker ids the question asks about."}]
        reply = self.model.chat(messages, max_tokens=200).text  # sampled as the model's config says
        found = re.search(r"\[.*?\]", reply, re.DOTALL)
        try:
            ids = json.loads(found.group(0)) if found else []
        except ValueError:
            return []
        known = {b.id for b in blockers}
        return [i for i in ids if isinstance(i, str) and i in known]


class SimulatedHuman:
    """Answers one episode's questions; remembers what was asked and revealed.

    A question the judge finds about more than ``max_blockers_per_question`` blockers is too broad
    to answer (a question that names every topic, keyword stuffing, "tell me everything"): the
    reply is neutral, nothing is revealed, and it counts as a question that hit no blocker."""

    def __init__(self, blockers: list[Blocker], judge: Judge,
                 max_blockers_per_question: int = MAX_BLOCKERS_PER_QUESTION):
        self.blockers, self.judge = blockers, judge
        self.max_blockers_per_question = max_blockers_per_question
        self.log: list[dict] = []

    def ask(self, question: str) -> str:
        question = (question or "").strip()
        ids = list(dict.fromkeys(self.judge.match(question, self.blockers))) if question else []
        entry: dict = {"question": question}
        if len(ids) > self.max_blockers_per_question:
            entry["too_broad"], ids = ids, []
        by_id = {b.id: b for b in self.blockers}
        reply = "\n".join(f"{by_id[i].topic}: {by_id[i].answer}" for i in ids) or NEUTRAL
        new = [i for i in ids if i not in self.revealed]
        self.log.append({**entry, "matched": ids, "new": new, "reply": reply})
        return reply

    @property
    def revealed(self) -> set[str]:
        return {i for entry in self.log for i in entry["matched"]}
