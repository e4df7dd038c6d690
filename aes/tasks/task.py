"""A Harbor task directory: load, locate its parts, write it back.

Layout (Harbor's): ``instruction.md``, ``task.toml``, ``environment/Dockerfile`` (the
build context is ``environment/``), ``solution/solve.sh``, ``tests/test.sh``. The
solver never sees ``solution/`` or ``tests/``: they are not in the image.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import tomlkit

from aes.tasks.config import TaskConfigError, TaskSpec, parse_task_toml, render_task_toml

REQUIRED_FILES = ("instruction.md", "task.toml", "solution/solve.sh", "tests/test.sh")


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


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise TaskLoadError("layout.not_utf8", f"{what} is not UTF-8 text") from None


def load_task(path: str | Path) -> Task:
    """Load a task directory; raises :class:`TaskLoadError` naming what is missing or wrong."""
    path = Path(path)
    if not path.is_dir():
        raise TaskLoadError("layout.not_a_directory", f"{path} is not a directory")
    for rel in REQUIRED_FILES:
        file = path / rel
        if file.is_symlink() or not file.is_file():
            kind = "a symlink" if file.is_symlink() else "missing"
            raise TaskLoadError("layout.missing_file", f"{rel} is {kind}; a Harbor task needs a regular file there")
    try:
        spec, doc = parse_task_toml(_read_text(path / "task.toml", "task.toml"))
    except TaskConfigError as exc:
        raise TaskLoadError(exc.code, str(exc)) from None
    dockerfile = path / "environment" / "Dockerfile"
    if spec.docker_image is None and (dockerfile.is_symlink() or not dockerfile.is_file()):
        raise TaskLoadError("layout.missing_file", "environment/Dockerfile is missing and task.toml names no docker_image")
    instruction = _read_text(path / "instruction.md", "instruction.md")
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
