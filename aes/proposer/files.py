"""Task files in model replies: ``<file path="...">...</file>`` blocks, parsed and written safely.

A reply is read as far as it can be (:func:`parse_reply`): a block whose path lies outside the
task layout (a note, a README beside the task, ``../x``) is left out with a note, not the whole
reply; a block the reply never closed — cut at ``max_tokens`` — is lost with a note that says so;
``<kit name="untrusted.py" path="tests/untrusted.py"/>`` asks aes to copy a kit file (the
workspace's ``instructions/kit/``) byte for byte instead of the model retyping it. Nothing is ever
written outside the draft directory.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from aes.tasks.task import read_capped

_FILE = re.compile(r'<file\s+path\s*=\s*"([^"]+)"\s*>\n?(.*?)</file>', re.DOTALL)
_OPEN = re.compile(r'<file\s+path\s*=\s*"([^"]+)"\s*>')
_KIT = re.compile(r'<kit\s+name\s*=\s*"([^"]+)"\s+path\s*=\s*"([^"]+)"\s*/?>')
TOP_FILES = {"instruction.md", "task.toml", "blockers.json"}
"""Files at the task root; ``blockers.json`` is a human-in-the-loop task's registry (aes/hil)."""
TOP_DIRS = {"environment", "solution", "tests"}
TOP_LEVEL = TOP_FILES | TOP_DIRS
MAX_FILES = 60
MAX_BYTES = 1 << 20
EXECUTABLE = {"solution/solve.sh", "tests/test.sh"}
FIRST = ("instruction.md", "tests/test_outputs.py", "tests/test.sh", "task.toml", "blockers.json",
         "environment/Dockerfile", "solution/solve.sh", "tests/", "solution/")
"""What :func:`render_files` shows first: what the agent is told and how it is checked, then the rest."""

FORMAT_HELP = (
    "Write every file of the task as a block of this form, one after another:\n"
    '<file path="instruction.md">\n...file content...\n</file>\n'
    "Paths are relative to the task directory: instruction.md, task.toml, environment/Dockerfile, "
    "environment/<input files>, solution/solve.sh, tests/test.sh, tests/test_outputs.py "
    "(and, for a human-in-the-loop task, blockers.json and solution/answers.json). Blocks with other "
    "paths are ignored. A file the instructions say to copy from instructions/kit/ byte for byte is "
    'not retyped: write <kit name="untrusted.py" path="tests/untrusted.py"/> and aes copies it in.'
)


class DraftError(ValueError):
    """A reply whose files cannot be written as a task."""


@dataclass
class Reply:
    """What a reply's blocks make of a draft."""

    files: dict[str, str] = field(default_factory=dict)
    """Path in the task -> content."""
    kits: dict[str, str] = field(default_factory=dict)
    """Path in the task -> kit file name, copied byte for byte when written."""
    notes: list[str] = field(default_factory=list)
    """What was left out and why (the proposer is told)."""


def _inside(raw: str) -> str | None:
    """``raw`` as a path inside the task layout, or None."""
    path = PurePosixPath(raw.strip())
    inside = bool(path.parts) and (path.parts[0] in TOP_DIRS and len(path.parts) > 1
                                   or path.parts[0] in TOP_FILES and len(path.parts) == 1)
    return None if path.is_absolute() or ".." in path.parts or not inside else path.as_posix()


def parse_reply(text: str, finish_reason: str = "stop", kits: set[str] | frozenset = frozenset()) -> Reply:
    """The task files of a model reply, with a note for each block left out. ``kits``: the kit
    file names a ``<kit>`` reference may name. Raises :class:`DraftError` only for a reply that is
    too large to be a task."""
    text = text or ""
    out = Reply()
    closed_end = 0
    for match in _FILE.finditer(text):
        closed_end = match.end()
        raw, content = match.group(1), match.group(2)
        rel = _inside(raw)
        if rel is None:
            out.notes.append(f"the block {raw!r} was ignored: not inside the task layout "
                             f"({', '.join(sorted(TOP_LEVEL))})")
            continue
        out.files[rel] = content
    for match in _KIT.finditer(text):
        name, raw = match.group(1).strip(), match.group(2)
        rel = _inside(raw)
        if rel is None:
            out.notes.append(f"the kit reference {raw!r} was ignored: not inside the task layout")
        elif name not in kits:
            out.notes.append(f"the kit reference to {name!r} was ignored: the kit holds "
                             f"{', '.join(sorted(kits)) or 'no files'}")
        else:
            out.kits[rel] = name
            out.files.pop(rel, None)
    unclosed = [m.group(1) for m in _OPEN.finditer(text, closed_end)]
    if unclosed:
        why = ("the reply was cut at the token limit (max_tokens)" if finish_reason == "length"
               else "its block was never closed with </file>")
        out.notes.append(f"{unclosed[0]!r} was not written: {why} inside it"
                         + (f"; {len(unclosed) - 1} later block(s) were lost with it" if len(unclosed) > 1 else "")
                         + ". Write shorter files, or fewer of them, so that every block closes.")
    elif finish_reason == "length":
        out.notes.append("the reply was cut at the token limit (max_tokens) after its last complete block: "
                         "anything it meant to write after that is missing")
    if len(out.files) + len(out.kits) > MAX_FILES:
        raise DraftError(f"{len(out.files) + len(out.kits)} files; at most {MAX_FILES}")
    if sum(len(c.encode()) for c in out.files.values()) > MAX_BYTES:
        raise DraftError(f"the files hold more than {MAX_BYTES // 1024} KiB")
    return out


def parse_files(text: str) -> dict[str, str]:
    """path -> content of the file blocks in ``text`` (a later block of the same path wins); a
    block outside the task layout is an error here (:func:`parse_reply` leaves it out instead)."""
    reply = parse_reply(text)
    outside = [n for n in reply.notes if "not inside the task layout" in n]
    if outside:
        raise DraftError(outside[0].replace("the block ", "file path ").replace(" was ignored:", " is"))
    return reply.files


def write_files(files: dict[str, str], dest: Path, kits: dict[str, str] | None = None,
                kit_dir: Path | None = None) -> None:
    """Write ``files`` under ``dest``; ``kits`` (path -> name) are copied from ``kit_dir``."""
    for rel, content in files.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        if rel in EXECUTABLE:
            path.chmod(0o755)
    for rel, name in (kits or {}).items():
        assert kit_dir is not None and "/" not in name, "kit files come from one folder"
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(kit_dir / name, path)


def _order(task_dir: Path, path: Path) -> tuple[int, str]:
    rel = path.relative_to(task_dir).as_posix()
    for i, first in enumerate(FIRST):
        if rel == first or (first.endswith("/") and rel.startswith(first)):
            return i, rel
    return len(FIRST), rel


def _kit_copy(path: Path, kit_dir: Path | None) -> str | None:
    """The kit file ``path`` is a byte copy of, if any."""
    if kit_dir is None or not (kit_dir / path.name).is_file():
        return None
    kit = kit_dir / path.name
    if kit.stat().st_size != path.stat().st_size:
        return None
    return path.name if kit.read_bytes() == path.read_bytes() else None


def render_files(task_dir: Path, max_chars: int, kit_dir: Path | None = None) -> str:
    """A task dir as ``<file>`` blocks (text files only), at most ``max_chars`` of them in all: the
    instruction and the tests first, then the other files as they fit; a closing line names each
    file left out, and a byte copy of a kit file (``kit_dir``) is named as one instead of shown."""
    out, skipped, kits, used = [], [], [], 0
    paths = sorted((p for p in task_dir.rglob("*") if p.is_file() and not p.is_symlink()),
                   key=lambda p: _order(task_dir, p))
    for path in paths:
        rel = path.relative_to(task_dir).as_posix()
        kit = _kit_copy(path, kit_dir)
        if kit is not None:
            kits.append(f'<kit name="{kit}" path="{rel}"/>')
            continue
        # A character is at most 4 bytes, so a file longer than this cannot fit: never read more.
        room = 4 * max(max_chars - used, 0) + 4
        try:
            data, size = read_capped(path, room)
        except OSError:
            continue
        if b"\0" in data[:4096]:
            skipped.append(f"{rel} (binary, {size} bytes)")
            continue
        if size > room:
            skipped.append(f"{rel} ({size} bytes)")
            continue
        text = data.decode("utf-8", errors="replace")
        block = f'<file path="{rel}">\n{text}</file>\n'
        if used + len(block) > max_chars:
            skipped.append(f"{rel} ({len(text)} characters)")
            continue
        out.append(block)
        used += len(block)
    if kits:
        out.append(f"[kit files of {task_dir.name}, byte copies of instructions/kit/: {' '.join(kits)}]\n")
    if skipped:
        more = f" and {len(skipped) - 30} more" if len(skipped) > 30 else ""
        out.append(f"[files of {task_dir.name} not shown (over the {max_chars}-character budget or binary): "
                   f"{', '.join(skipped[:30])}{more}]\n")
    return "".join(out)
