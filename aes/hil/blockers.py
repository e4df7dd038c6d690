"""The blocker registry of a HiL task: what the instruction withholds, and the answers."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aes.hil.cues import unspecific
from aes.tasks import Reason

TYPES = ("missing_parameters", "business_information", "ambiguous_requirements", "contradictory_information",
         "question", "schema")
"""The HiL-Bench taxonomy of blockers."""
REGISTRY = "blockers.json"
ANSWERS = "solution/answers.json"
FIELDS = frozenset({"id", "type", "topic", "keywords", "answer", "alternative", "guess"})
_ID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


class BlockerError(ValueError):
    """The registry of a HiL task is malformed; ``code`` is the machine-readable reason."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Blocker:
    id: str
    type: str
    topic: str
    """What the blocker is about, in a few words (the judge matches questions against it)."""
    answer: str
    """The withheld answer (never shown to the solver unless it asks)."""
    keywords: tuple[str, ...] = field(default_factory=tuple)
    """What a specific question about it must name: each keyword is a set of words a question must
    contain, all of them, in any order (:mod:`aes.hil.cues`; the keyword judge's rule, and what the
    model judge is shown)."""
    alternative: str = ""
    """Another answer, in the same form, that the reference parses and acts on and the tests must
    reject: admission runs the reference with it to check the blocker matters."""
    guess: str | None = None
    """What a solver that did not ask would most likely assume (None: the alternative); admission's
    guess run uses every blocker's guess at once."""

    @property
    def guessed(self) -> str:
        return self.alternative if self.guess is None else self.guess

    def public(self) -> dict:
        """The blocker without its answer (what a model judge sees)."""
        return {"id": self.id, "type": self.type, "topic": self.topic, "keywords": list(self.keywords)}

    def to_dict(self) -> dict:
        data = asdict(self)
        data["keywords"] = list(self.keywords)
        if self.guess is None:
            del data["guess"]
        return data


def is_hil_task(task_dir: str | Path) -> bool:
    return (Path(task_dir) / REGISTRY).is_file()


def load_blockers(task_dir: str | Path, max_bytes: int = 1 << 20) -> list[Blocker]:
    """The task's registry, checked: a list of blockers with unique ids, a known type, a topic, an
    answer and an alternative answer (optionally a guess); ``solution/answers.json`` must hold
    exactly the answers."""
    root = Path(task_dir)
    path = root / REGISTRY
    if not path.is_file():
        raise BlockerError("hil.no_registry", f"{REGISTRY} is missing: a HiL task lists its withheld details there")
    if path.stat().st_size > max_bytes:
        raise BlockerError("hil.registry_too_large", f"{REGISTRY} is over {max_bytes >> 10} KiB")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BlockerError("hil.registry_syntax", f"{REGISTRY} is not JSON: {exc}") from None
    if not isinstance(raw, list) or not raw:
        raise BlockerError("hil.registry_empty", f"{REGISTRY} must be a non-empty list of blockers")
    blockers, seen = [], set()
    for i, item in enumerate(raw):
        where = f"{REGISTRY} item {i}"
        if not isinstance(item, dict):
            raise BlockerError("hil.blocker_invalid", f"{where} is not an object")
        missing = [k for k in ("id", "type", "topic", "answer") if not isinstance(item.get(k), str) or not item[k].strip()]
        if missing:
            raise BlockerError("hil.blocker_invalid", f"{where} needs non-empty string(s): {', '.join(missing)}")
        if not _ID.match(item["id"]):
            raise BlockerError("hil.blocker_invalid", f"{where}: id {item['id']!r} must be letters, digits, - or _")
        if item["id"] in seen:
            raise BlockerError("hil.blocker_duplicate", f"{where}: id {item['id']!r} appears twice")
        if item["type"] not in TYPES:
            raise BlockerError("hil.blocker_type", f"{where}: type {item['type']!r} is not one of {', '.join(TYPES)}")
        keywords = item.get("keywords", [])
        if not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords):
            raise BlockerError("hil.blocker_invalid", f"{where}: keywords must be a list of strings")
        where = f"{where} ({item['id']})"
        alternative, guess = _alternative(item, where), _guess(item, where)
        unknown = sorted(set(item) - FIELDS)
        if unknown:
            raise BlockerError("hil.blocker_invalid", f"{where}: unknown field(s) {', '.join(unknown)}; a blocker "
                                                      f"has {', '.join(sorted(FIELDS))}")
        seen.add(item["id"])
        blockers.append(Blocker(item["id"], item["type"], item["topic"].strip(), item["answer"], tuple(keywords),
                                alternative, guess))
    _check_answers(root, blockers)
    return blockers


def _alternative(item: dict, where: str) -> str:
    value = item.get("alternative")
    if not isinstance(value, str) or not value.strip():
        raise BlockerError("hil.no_alternative",
                           f"{where} needs \"alternative\": another answer in the same form as \"answer\" that "
                           "solution/solve.sh parses and acts on and the tests reject (admission runs the reference "
                           "with it to check the blocker matters; a reference that cannot read it proves nothing)")
    if value == item["answer"]:
        raise BlockerError("hil.alternative_same", f"{where}: \"alternative\" equals \"answer\"; it must be a "
                                                   "different answer the tests reject")
    return value


def _guess(item: dict, where: str) -> str | None:
    if "guess" not in item or item["guess"] is None:
        return None
    if not isinstance(item["guess"], str) or not item["guess"].strip():
        raise BlockerError("hil.blocker_invalid", f"{where}: \"guess\" must be a non-empty string in the form of "
                                                  "\"answer\" (the default a solver that did not ask would assume), "
                                                  "or left out (the alternative is guessed)")
    return item["guess"]


def _check_answers(root: Path, blockers: list[Blocker]) -> None:
    path = root / ANSWERS
    if not path.is_file():
        raise BlockerError("hil.no_answers", f"{ANSWERS} is missing: the reference solution must read the withheld "
                                             "answers from there (one place), so each can be changed to check it matters")
    try:
        answers = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BlockerError("hil.answers_syntax", f"{ANSWERS} is not JSON: {exc}") from None
    expected = {b.id: b.answer for b in blockers}
    if answers != expected:
        raise BlockerError("hil.answers_mismatch", f"{ANSWERS} must hold exactly the registry's answers {{id: answer}}; "
                                                   f"it has {sorted(answers) if isinstance(answers, dict) else answers!r}")


def registry_reasons(task_dir: str | Path, required: bool = False) -> list[Reason]:
    """The static check of a task's registry: [] when it loads and every blocker's keywords single it
    out, else the reasons (``hil.*``). ``required``: the domain's tasks are all human-in-the-loop, so a
    missing registry is named so."""
    try:
        blockers = load_blockers(task_dir)
    except BlockerError as exc:
        message = str(exc)
        if exc.code == "hil.no_registry" and required:
            message = (f"{REGISTRY} is missing, and every task of this domain is human-in-the-loop "
                       "(domain.blocker_registry): list the withheld details there (id, type, topic, keywords, "
                       "answer, alternative) and their answers in solution/answers.json")
        return [Reason(exc.code, message)]
    instruction = Path(task_dir) / "instruction.md"
    text = instruction.read_text(encoding="utf-8", errors="replace") if instruction.is_file() else ""
    found = []
    for blocker in blockers:
        if not blocker.keywords:
            found.append(f"{blocker.id} has no keywords")
        found += [f"{blocker.id}: {why}" for why in unspecific(blocker.keywords, text)]
    if not found:
        return []
    return [Reason("hil.unspecific_keywords",
                   "; ".join(found) + ". A blocker's keywords say what a question must name to ask about it (every "
                   "word of one keyword, in any order): name the withheld detail itself (\"grace period days\", "
                   "\"late fee percent per month\"), in words no generic question and no single sentence of the "
                   "instruction holds")]


def write_answers(task_dir: Path, answers: dict[str, str]) -> None:
    (task_dir / ANSWERS).write_text(json.dumps(answers, indent=2) + "\n")
