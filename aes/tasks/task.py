"""A Harbor task directory: load, locate its parts, write it back.

Layout (Harbor's): ``instruction.md``, ``task.toml``, ``environment/Dockerfile`` (the
build context is ``environment/``), ``solution/solve.sh``, ``tests/test.sh``. The
solver never sees ``solution/`` or ``tests/``: they are not in the image.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

import tomlkit

from aes.config.schema import SandboxConfig
from aes.tasks.config import TaskConfigError, TaskSpec, parse_task_toml, render_task_toml

REQUIRED_FILES = ("instruction.md", "task.toml", "solution/solve.sh", "tests/test.sh")
DEFAULT_MAX_INSTRUCTION_KB: int = SandboxConfig.max_instruction_kb
"""Largest instruction.md :func:`load_task` reads, in KiB (``sandbox.max_instruction_kb``'s default)."""
MAX_TASK_TOML_KB = 256
"""Largest task.toml :func:`load_task` reads, in KiB (an honest one is a few hundred bytes)."""


class TaskLoadError(ValueError):
    """A task directory that cannot be used; ``code`` is the machine-readable reason."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class Task:
    """A loaded Harbor task."""

    path: Path
    spec: TaskSpec
    doc: tomlkit.TOMLDocument
    instruction: str
    env_id: str | None = None
    """The pool's id for this task, when it came from the pool."""

    @property
    def name(self) -> str:
        """``[task] name``, or the directory name for tasks without a ``[task]`` section."""
        return self.spec.name or self.path.name

    @property
    def slug(self) -> str:
        """The name reduced to characters safe in image tags and file names."""
        return re.sub(r"[^a-z0-9_.-]+", "-", self.name.lower()).strip("-.") or "task"

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def dockerfile(self) -> Path:
        return self.environment_dir / "Dockerfile"

    @property
    def solution_dir(self) -> Path:
        return self.path / "solution"

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"


def read_capped(path: Path, limit: int, head: bool = True) -> tuple[bytes, int]:
    """(the first ``limit`` bytes of the regular file ``path``, its size): never more is read.

    The head is the whole file exactly when the size is ``<= limit``. The file is opened
    without following a symlink and without blocking on a FIFO, so a file swapped under
    the reader cannot make it read something else or wait forever; ``limit + 1`` bytes
    are read (the size from ``fstat`` is not trusted alone), so a file that grew after
    the stat still counts as oversized. Raises OSError for anything but a regular file.
    With ``head=False`` a file whose size (from ``fstat``) is over ``limit`` is not read at all.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb", closefd=True) as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        if not head and info.st_size > limit:
            return b"", info.st_size
        data = fh.read(limit + 1)
    return data[:limit], max(info.st_size, len(data))


def _read_text(path: Path, what: str, limit_bytes: int, code: str, key: str) -> str:
    """``path`` as UTF-8 text, refused with ``code`` (and never read whole) past ``limit_bytes``."""
    try:
        data, size = read_capped(path, limit_bytes, head=False)
    except OSError as exc:
        raise TaskLoadError("layout.unreadable", f"{what} cannot be read: {exc.strerror or exc}") from None
    if size > limit_bytes:
        raise TaskLoadError(code, f"{what} is {_size(size)}; the limit is {_size(limit_bytes)} ({key})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise TaskLoadError("layout.not_utf8", f"{what} is not UTF-8 text") from None


def _size(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / 2**20:.1f} MiB"
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} bytes"


def load_task(path: str | Path, *, max_instruction_kb: int | None = None,
              max_toml_kb: int | None = None) -> Task:
    """Load a task directory; raises :class:`TaskLoadError` naming what is missing or wrong.

    instruction.md and task.toml are checked for size before they are read (and never read
    past their limit): ``max_instruction_kb`` (default: ``sandbox.max_instruction_kb``'s
    default, :data:`DEFAULT_MAX_INSTRUCTION_KB`; the validator passes its config's value) and
    ``max_toml_kb`` (default :data:`MAX_TASK_TOML_KB`). An oversized file is a
    ``layout.instruction_too_large`` / ``layout.task_toml_too_large`` error.
    """
    path = Path(path)
    instruction_limit = int((max_instruction_kb or DEFAULT_MAX_INSTRUCTION_KB) * 1024)
    toml_limit = int((max_toml_kb or MAX_TASK_TOML_KB) * 1024)
    if not path.is_dir():
        raise TaskLoadError("layout.not_a_directory", f"{path} is not a directory")
    for rel in REQUIRED_FILES:
        file = path / rel
        if file.is_symlink() or not file.is_file():
            kind = "a symlink" if file.is_symlink() else "missing"
            raise TaskLoadError("layout.missing_file", f"{rel} is {kind}; a Harbor task needs a regular file there")
    text = _read_text(path / "task.toml", "task.toml", toml_limit, "layout.task_toml_too_large",
                      "a task.toml holds a few settings; move data into environment/")
    try:
        spec, doc = parse_task_toml(text)
    except TaskConfigError as exc:
        raise TaskLoadError(exc.code, str(exc)) from None
    dockerfile = path / "environment" / "Dockerfile"
    if spec.docker_image is None and (dockerfile.is_symlink() or not dockerfile.is_file()):
        raise TaskLoadError("layout.missing_file", "environment/Dockerfile is missing and task.toml names no docker_image")
    instruction = _read_text(path / "instruction.md", "instruction.md", instruction_limit,
                             "layout.instruction_too_large",
                             "sandbox.max_instruction_kb; put large material into environment/ files instead")
    if not instruction.strip():
        raise TaskLoadError("layout.empty_instruction", "instruction.md is empty")
    return Task(path=path.resolve(), spec=spec, doc=doc, instruction=instruction)


def find_tasks(paths: list[str | Path]) -> list[Path]:
    """Expand each path: a task dir (has task.toml) stays, a dir of task dirs expands."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if (path / "task.toml").exists() or not path.is_dir():
            found.append(path)
            continue
        children = sorted(p for p in path.iterdir() if p.is_dir() and (p / "task.toml").exists())
        found.extend(children or [path])
    return found


def write_task(task: Task, dest: str | Path) -> Task:
    """Copy ``task`` to ``dest`` with its task.toml re-rendered from the spec."""
    dest = Path(dest)
    if dest.exists():
        raise FileExistsError(f"{dest} exists; choose a new directory")
    shutil.copytree(task.path, dest, symlinks=True)
    (dest / "task.toml").write_text(render_task_toml(task.spec, task.doc), encoding="utf-8")
    (dest / "instruction.md").write_text(task.instruction, encoding="utf-8")
    return load_task(dest)
