"""Decontamination (admission check 5): no 13-word window shared with a held-out benchmark task.

Instructions are lower-cased and split into words (``\\w+``); every window of ``n``
consecutive words (stride 1) of every held-out instruction is indexed, and a candidate
is rejected when any of its windows is in the index.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from aes.tasks import Reason, find_tasks

log = logging.getLogger(__name__)
_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def windows(text: str, n: int) -> list[tuple[str, ...]]:
    tokens = words(text)
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


class Decontaminator:
    """An index of the n-gram windows of held-out benchmark instructions."""

    def __init__(self, benchmark: dict[str, str] | None = None, n: int = 13):
        self.n = n
        self.index: dict[tuple[str, ...], str] = {}
        for name, text in (benchmark or {}).items():
            for window in windows(text, n):
                self.index.setdefault(window, name)

    @classmethod
    def from_dir(cls, path: str | Path | None, n: int = 13) -> "Decontaminator":
        """Index every ``instruction.md`` of the task dirs under ``path`` (None: an empty index)."""
        if path is None:
            return cls({}, n)
        root = Path(path)
        if not root.is_dir():
            raise FileNotFoundError(f"benchmark task dir {root} not found (domain.benchmark_instructions)")
        texts = {}
        for task_dir in find_tasks([root]):
            instruction = task_dir / "instruction.md"
            if instruction.is_file():
                texts[task_dir.name] = instruction.read_text(encoding="utf-8", errors="replace")
        log.info("decontamination index: %d held-out instructions, %d windows of %d words",
                 len(texts), sum(len(windows(t, n)) for t in texts.values()), n)
        return cls(texts, n)

    def check(self, instruction: str) -> Reason | None:
        for window in windows(instruction, self.n):
            if window in self.index:
                return Reason("decontam.overlap",
                              f"the instruction shares the {self.n}-word sequence \"{' '.join(window)}\" "
                              f"with held-out benchmark task {self.index[window]!r}; write it in your own words")
        return None
