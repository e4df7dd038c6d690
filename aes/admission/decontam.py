"""Decontamination (admission check 5): no 13-word window shared with a held-out benchmark task.

One recipe for everything (the one of ``aes/domains/terminal/decontam/README.md``): the text
is lower-cased and split into words (Python ``re``, ``\\w+``); every window of ``n``
consecutive words (stride 1) is joined with single spaces and hashed with BLAKE2b, 8-byte
digest, as 16 hex digits. The index is a set of such hashes, filled from

* hash files (``#`` comment lines, then one hash a line; ``aes decontam build`` writes them,
  and each domain ships one as its default, ``domain.decontam_index``), and
* benchmark text: task dirs, dirs of them (every ``instruction.md`` below, at any depth) or
  instruction files (``domain.benchmark_instructions``), hashed the same way.

A candidate is rejected (``decontam.overlap``) when any of its windows is in the index. The
reason says how many windows overlap and quotes the candidate's *own* overlapping words:
a hash index holds no benchmark text, and nothing of a text benchmark is shown either.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from aes.config import ConfigError
from aes.tasks import Reason

log = logging.getLogger(__name__)
_WORD = re.compile(r"\w+")
_HASH = re.compile(r"[0-9a-f]{16}")
_HEADER_N = re.compile(r"\b(\d+)-gram")
QUOTE_WORDS = 40
"""Most words of the candidate quoted in a rejection."""


def words(text: str) -> list[str]:
    """The tokens of the recipe: ``re.findall(r"\\w+", text.lower())``."""
    return _WORD.findall(text.lower())


def window_hash(tokens: Sequence[str]) -> str:
    """The hash of one window of tokens: BLAKE2b-64 of the words joined by single spaces."""
    return hashlib.blake2b(" ".join(tokens).encode(), digest_size=8).hexdigest()


def window_hashes(tokens: Sequence[str], n: int) -> list[str]:
    """The hash of every window of ``n`` tokens, in order (stride 1)."""
    return [window_hash(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def ngram_hashes(text: str, n: int = 13) -> set[str]:
    """The distinct hashes of the ``n``-word windows of ``text`` (what index files hold)."""
    return set(window_hashes(words(text), n))


def windows(text: str, n: int) -> list[tuple[str, ...]]:
    """The ``n``-word windows of ``text`` themselves (stride 1)."""
    tokens = words(text)
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


# -- index files --------------------------------------------------------------------------------

def is_hash_file(path: Path) -> bool:
    """A file of ``#`` comment lines and hash lines (at least one hash), not text."""
    if not path.is_file() or path.name == "instruction.md":
        return False
    seen = False
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if not _HASH.fullmatch(line):
                return False
            seen = True
    return seen


def read_index(path: str | Path) -> tuple[set[str], int | None]:
    """The hashes of an index file and the window size its header states (``13-gram``), if any."""
    path = Path(path)
    hashes: set[str] = set()
    n: int | None = None
    with path.open(encoding="utf-8") as fh:
        for number, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line:
                continue
            if line.startswith("#"):
                found = _HEADER_N.search(line)
                if found and n is None:
                    n = int(found.group(1))
                continue
            if not _HASH.fullmatch(line):
                raise ValueError(f"{path}:{number}: not a hash (16 lowercase hex digits): {line[:40]!r}")
            hashes.add(line)
    return hashes, n


def write_index(path: str | Path, hashes: Iterable[str], comment: str) -> Path:
    """Write an index file: one ``#`` comment line, then the sorted unique hashes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    comment = " ".join(comment.split())
    body = "".join(f"{h}\n" for h in sorted(set(hashes)))
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(f"# {comment}\n{body}", encoding="utf-8")
    tmp.replace(path)
    return path


def instruction_files(paths: Iterable[str | Path]) -> list[tuple[str, Path]]:
    """(name, file) of every instruction a path stands for: a file is itself; a dir is every
    ``instruction.md`` below it, at any depth (hidden dirs skipped), named by its task dir."""
    found: list[tuple[str, Path]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            found.append((str(path), path))
            continue
        if not path.is_dir():
            raise FileNotFoundError(f"{path} does not exist")
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            if "instruction.md" in filenames:
                found.append((str(Path(dirpath)), Path(dirpath) / "instruction.md"))
    return found


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


# -- the check ----------------------------------------------------------------------------------

@dataclass
class Overlap:
    """What one candidate text shares with the index."""

    matches: int
    """The candidate's windows (positions, stride 1) whose hash is in the index."""
    windows: int
    """All of the candidate's windows."""
    spans: list[tuple[int, int]] = field(default_factory=list)
    """Word ranges [start, end) of the candidate covered by overlapping windows, merged."""
    sources: list[str] = field(default_factory=list)
    """Held-out sources hit: benchmark task names, or the index file's name."""
    tokens: list[str] = field(default_factory=list)
    """The candidate's words (lower-cased), for quoting."""

    def quote(self, limit: int = QUOTE_WORDS) -> str:
        """The candidate's own words of the first overlapping span (at most ``limit``)."""
        if not self.spans:
            return ""
        start, end = self.spans[0]
        text = " ".join(self.tokens[start:min(end, start + limit)])
        return text + (" ..." if end - start > limit else "")


class Decontaminator:
    """A hash index of the ``n``-word windows of held-out benchmark instructions."""

    def __init__(self, benchmark: dict[str, str] | None = None, n: int = 13):
        if n < 1:
            raise ConfigError(f"admission.ngram must be >= 1, got {n}")
        self.n = n
        self.index: dict[str, str] = {}
        """hash -> the source that first contributed it."""
        self.sources: list[str] = []
        """What was indexed, for logs."""
        self.instructions = 0
        """Instruction texts hashed into the index."""
        self.index_files = 0
        """Hash files read into the index."""
        for name, text in (benchmark or {}).items():
            self.add_text(name, text)

    def __len__(self) -> int:
        return len(self.index)

    @property
    def empty(self) -> bool:
        return not self.index

    # -- filling the index --

    def add_hashes(self, hashes: Iterable[str], source: str) -> int:
        before = len(self.index)
        for h in hashes:
            self.index.setdefault(h, source)
        self.sources.append(source)
        return len(self.index) - before

    def add_text(self, name: str, text: str) -> int:
        before = len(self.index)
        for h in window_hashes(words(text), self.n):
            self.index.setdefault(h, name)
        self.sources.append(name)
        self.instructions += 1
        return len(self.index) - before

    def add_index_file(self, path: str | Path) -> int:
        path = Path(path)
        hashes, n = read_index(path)
        if n is not None and n != self.n:
            raise ConfigError(f"decontamination index {path} holds {n}-word windows but admission.ngram is "
                              f"{self.n}; rebuild it with `aes decontam build --n {self.n}` or set admission.ngram={n}")
        self.index_files += 1
        return self.add_hashes(hashes, path.name)

    def add_path(self, path: str | Path) -> int:
        """A hash file, an instruction file, a task dir or a dir of task dirs (one code path:
        text is hashed with the recipe, hash files are read as they are)."""
        path = Path(path)
        if is_hash_file(path):
            return self.add_index_file(path)
        files = instruction_files([path])
        if not files:
            raise FileNotFoundError(f"no instruction.md under {path}")
        added = 0
        for name, file in files:
            if path.is_dir():
                name = os.path.relpath(name, path.parent)
            else:
                name = file.parent.name if file.name == "instruction.md" and file.parent.name else file.name
            added += self.add_text(name, _read(file))
        return added

    @classmethod
    def from_paths(cls, paths: Iterable[str | Path], n: int = 13) -> "Decontaminator":
        decon = cls(None, n)
        for path in paths:
            decon.add_path(path)
        return decon

    @classmethod
    def from_dir(cls, path: str | Path | None, n: int = 13) -> "Decontaminator":
        """Index every instruction under ``path`` (None: an empty index)."""
        return cls.from_paths([] if path is None else [path], n)

    @classmethod
    def from_domain(cls, domain, n: int = 13) -> "Decontaminator":
        """The index of a domain: its hash file (``domain.decontam_index``, the packaged default)
        plus the benchmark task dirs of ``domain.benchmark_instructions``. Warns, in one line,
        when both are unset: decontamination is then off."""
        from aes.domains import decontam_index_path

        decon = cls(None, n)
        index = decontam_index_path(domain)
        if index is not None:
            decon.add_index_file(index)
        if domain.benchmark_instructions:
            bench = Path(domain.benchmark_instructions).expanduser()
            if not bench.exists():
                raise ConfigError(f"domain.benchmark_instructions: {bench} does not exist")
            try:
                decon.add_path(bench)
            except FileNotFoundError as exc:
                raise ConfigError(f"domain.benchmark_instructions: {exc}") from None
        if decon.empty:
            log.warning("decontamination (admission check 5) is OFF: domain %r has no held-out benchmark index; "
                        "set domain.decontam_index (a hash file, `aes decontam build`) or "
                        "domain.benchmark_instructions (benchmark task dirs)", domain.name)
        else:
            log.info("decontamination index: %d %d-word window hashes from %s", len(decon), n,
                     ", ".join(decon.sources[:3]) + (f" and {len(decon.sources) - 3} more" if len(decon.sources) > 3 else ""))
        return decon

    # -- checking --

    def scan(self, text: str) -> Overlap:
        """Every window of ``text`` looked up in the index."""
        tokens = words(text)
        hashes = window_hashes(tokens, self.n)
        hits = [i for i, h in enumerate(hashes) if h in self.index]
        spans: list[tuple[int, int]] = []
        for i in hits:
            if spans and i <= spans[-1][1]:
                spans[-1] = (spans[-1][0], i + self.n)
            else:
                spans.append((i, i + self.n))
        sources = list(dict.fromkeys(self.index[hashes[i]] for i in hits))
        return Overlap(len(hits), len(hashes), spans, sources, tokens)

    def check(self, instruction: str) -> Reason | None:
        """``decontam.overlap`` when the instruction shares any window with the index."""
        if self.empty:
            return None
        found = self.scan(instruction)
        if not found.matches:
            return None
        held_out = ", ".join(repr(s) for s in found.sources[:3]) + (" ..." if len(found.sources) > 3 else "")
        passages = f" ({len(found.spans)} passages)" if len(found.spans) > 1 else ""
        return Reason("decontam.overlap",
                      f"{found.matches} of the instruction's {found.windows} {self.n}-word windows also occur in "
                      f"held-out benchmark instructions ({held_out}); your overlapping words{passages}: "
                      f"\"{found.quote()}\"; write them in your own words")
