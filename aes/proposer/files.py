"""Task files in model replies: ``<file path="...">...</file>`` blocks, parsed and written safely."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from aes.tasks.task import read_capped

_FILE = re.compile(r'<file\s+path\s*=\s*"([^"]+)"\s*>\n?(.*?)</file>', re.DOTALL)
TOP_FILES = {"instruction.md", "task.toml", "blockers.json"}
"""Files at the task root; ``blockers.json`` is a human-in-the-loop task's registry (aes/hil)."""
TOP_DIRS = {"environment", "solution", "tests"}
TOP_LEVEL = TOP_FILES | TOP_DIRS
MAX_FILES = 60
MAX_BYTES = 1 << 20
EXECUTABLE = {"solution/solve.sh", "tests/test.sh"}

FORMAT_HELP = (
    "Write every file of the task as a block of this form, one after another:\n"
    '<file path="instruction.md">\n...file content...\n</file>\n'
    "Paths are relative to the task directory: instruction.md, task.toml, environment/Dockerfile, "
    "environment/<input files>, solution/solve.sh, tests/test.sh, tests/test_outputs.py "
    "(and, for a human-in-the-loop task, blockers.json and solution/answers.json)."
)


class DraftError(ValueError):
    """A reply whose files cannot be written as a task."""


def parse_files(text: str) -> dict[str, str]:
    """path -> content of the file blocks in ``text`` (a later block of the same path wins)."""
    files: dict[str, str] = {}
    for raw_path, content in _FILE.findall(text or ""):
        path = PurePosixPath(raw_path.strip())
        inside = bool(path.parts) and (path.parts[0] in TOP_DIRS and len(path.parts) > 1
                                       or path.parts[0] in TOP_FILES and len(path.parts) == 1)
        if path.is_absolute() or ".." in path.parts or not inside:
            raise DraftError(f"file path {raw_path!r} is not inside the task layout ({', '.join(sorted(TOP_LEVEL))})")
        files[path.as_posix()] = content
    if len(files) > MAX_FILES:
        raise DraftError(f"{len(files)} files; at most {MAX_FILES}")
    if sum(len(c.encode()) for c in files.values()) > MAX_BYTES:
        raise DraftError(f"the files hold more than {MAX_BYTES // 1024} KiB")
    return files


def write_files(files: dict[str, str], dest: Path) -> None:
    for rel, content in files.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        if rel in EXECUTABLE:
            path.chmod(0o755)


def render_files(task_dir: Path, max_chars: int) -> str:
    """A task dir as ``<file>`` blocks (text files only), cut at ``max_chars`` in all."""
    out, used = [], 0
    for path in sorted(p for p in task_dir.rglob("*") if p.is_file() and not p.is_symlink()):
        # A character is at most 4 bytes, so a file longer than this cannot fit: never read more.
        room = 4 * max(max_chars - used, 0) + 4
        try:
            data, size = read_capped(path, room)
        except OSError:
            continue
        if b"\0" in data[:4096]:
            continue
        if size > room:
            out.append(f"[... more files of {task_dir.name} omitted ...]\n")
            break
        text = data.decode("utf-8", errors="replace")
        block = f'<file path="{path.relative_to(task_dir).as_posix()}">\n{text}</file>\n'
        if used + len(block) > max_chars:
            out.append(f"[... more files of {task_dir.name} omitted ...]\n")
            break
        out.append(block)
        used += len(block)
    return "".join(out)
