"""Static admission checks (DESIGN.md admission step 1): nothing is built or run.

Checks the build context, the Dockerfile and any compose file for what would leak
the answer into the image or give a container power over the host.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from aes.config.schema import SandboxConfig
from aes.tasks.startup import env_reasons
from aes.tasks.task import Task, read_capped

DEFAULT_MAX_CONTEXT_MB: int = SandboxConfig.max_context_mb
DEFAULT_MAX_TESTS_MB: int = SandboxConfig.max_tests_mb
MAX_TREE_ENTRIES = 100_000
"""Most entries (files, directories, links) counted in each of environment/, solution/, tests/
and the rest of a task; past it the walk stops and the task is rejected."""
MIN_LEAK_BYTES = 16
"""Files smaller than this (an empty ``__init__.py``, a newline) are never called leaks."""
HASH_CHUNK = 1 << 20
"""Files are compared by size first, then hashed in chunks of this many bytes (never read whole)."""
MAX_BUILD_FILE_BYTES = 1 << 20
"""Largest Dockerfile, .dockerignore or compose file read (they are parsed as text)."""
MAX_FILE_BYTES_HASHED = MAX_BUILD_FILE_BYTES * 8
"""Kept for compatibility: the old whole-file hashing limit. Hashing is now streamed; what bounds
it is the size of each directory (``max_tests_mb``, ``max_context_mb``)."""

_EXPECTED_NAME = re.compile(
    r"^(expected|answer|golden|gold|reference|oracle|ground[_-]?truth|groundtruth)|(?<![a-z])solution", re.IGNORECASE)
_CODE_SUFFIXES = {".sh", ".bash", ".py"}
_CODE_NAMES = {"test.sh", "conftest.py"}


@dataclass(frozen=True)
class Reason:
    """Why a check failed: ``code`` for machines (``stage.what``), ``message`` for people."""

    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def dockerfile_instructions(text: str) -> list[tuple[str, str, int]]:
    """(INSTRUCTION, arguments, line number) with continuations joined and comments dropped."""
    out: list[tuple[str, str, int]] = []
    buf, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue
        if not buf:
            start = number
        if stripped.endswith("\\"):
            buf += stripped[:-1].rstrip() + " "
            continue
        buf += stripped
        word, _, args = buf.partition(" ")
        out.append((word.upper(), args.strip(), start))
        buf = ""
    if buf:
        word, _, args = buf.partition(" ")
        out.append((word.upper(), args.strip(), start))
    return out


def check_task(task: Task, max_context_mb: int = DEFAULT_MAX_CONTEXT_MB, *,
               max_tests_mb: int = DEFAULT_MAX_TESTS_MB, max_instruction_kb: int | None = None,
               max_entries: int = MAX_TREE_ENTRIES) -> list[Reason]:
    """All static checks; an empty list means the task passed.

    Nothing is read whole: sizes come from ``lstat`` (a sparse file counts at its apparent
    size), each directory walk stops after ``max_entries`` entries, and files are hashed
    in chunks only when their sizes match. ``max_tests_mb`` bounds tests/ and solution/
    each, ``max_context_mb`` environment/; ``max_instruction_kb`` (when given) re-checks the
    loaded instruction. :func:`check_task_with_config` passes all of them from a SandboxConfig.
    """
    reasons: list[Reason] = []
    if max_instruction_kb is not None:
        size = len(task.instruction.encode("utf-8"))
        if size > max_instruction_kb * 1024:
            reasons.append(Reason(
                "static.layout.instruction_too_large",
                f"instruction.md is {_mib(size)}; the limit is {max_instruction_kb} KiB "
                "(sandbox.max_instruction_kb); put large material into environment/ files instead",
            ))
    reasons += _check_files(task, max_context_mb, max_tests_mb, max_entries)
    dockerfile = _read_build_file(task, task.dockerfile, reasons)
    if dockerfile is not None:
        reasons += check_dockerfile(dockerfile)
    for name in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml"):
        path = task.environment_dir / name
        text = _read_build_file(task, path, reasons)
        if text is not None:
            reasons += check_compose(path, text)
    _read_build_file(task, task.environment_dir / ".dockerignore", reasons)
    reasons += _check_toml_options(task)
    return reasons


def check_task_with_config(task: Task, cfg: SandboxConfig) -> list[Reason]:
    """:func:`check_task` with every limit taken from ``cfg`` (what the validator calls):
    ``max_context_mb``, ``max_tests_mb`` (tests/ and solution/) and ``max_instruction_kb``."""
    return check_task(task, cfg.max_context_mb, max_tests_mb=cfg.max_tests_mb,
                      max_instruction_kb=cfg.max_instruction_kb)


def _mib(size: int) -> str:
    if size >= 1 << 20:
        return f"{size / 2**20:.0f} MiB"
    return f"{size / 1024:.0f} KiB"


def _read_build_file(task: Task, path: Path, reasons: list[Reason]) -> str | None:
    """A Dockerfile / compose / .dockerignore as text, or None (with a reason when too large)."""
    try:
        if not path.is_file():
            return None
        resolved = path.resolve()
        if not resolved.is_relative_to(task.path.resolve()):
            return None  # a symlink out of the task: _check_files reports it
        data, size = read_capped(resolved, MAX_BUILD_FILE_BYTES)
    except (OSError, RuntimeError):
        return None
    if size > MAX_BUILD_FILE_BYTES:
        reasons.append(Reason(
            "static.build_file_too_large",
            f"environment/{path.name} is {_mib(size)}; Dockerfile, .dockerignore and compose files "
            f"may hold at most {MAX_BUILD_FILE_BYTES // 1024} KiB",
        ))
        return None
    return data.decode("utf-8", errors="replace")


class _TooMany(Exception):
    """A directory walk passed its entry limit."""


def _walk(top: Path, max_entries: int, skip: frozenset[str] = frozenset()) -> Iterator[tuple[str, os.stat_result]]:
    """(path relative to ``top``, lstat) of every entry below ``top``, symlinks not followed.

    Memory stays bounded: directories are read with ``os.scandir`` one at a time, and past
    ``max_entries`` entries :class:`_TooMany` is raised. ``skip`` names entries of ``top``
    itself to leave out.
    """
    count = 0
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            listing = os.scandir(top / rel if rel else top)
        except OSError:
            continue
        with listing:
            for entry in listing:
                if not rel and entry.name in skip:
                    continue
                count += 1
                if count > max_entries:
                    raise _TooMany
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                child = f"{rel}/{entry.name}" if rel else entry.name
                if stat.S_ISDIR(info.st_mode):
                    stack.append(child)
                yield child, info


@dataclass
class _Area:
    """What one walk saw: total bytes of regular files and the files kept for the leak check."""

    total: int = 0
    complete: bool = True
    files: list[tuple[str, int]] = field(default_factory=list)


def _scan(task: Task, root: Path, rel_top: str, max_entries: int, reasons: list[Reason],
          keep=lambda size: False, skip: frozenset[str] = frozenset()) -> _Area:
    """Walk ``rel_top`` of the task: symlink escapes into ``reasons``, sizes summed, files kept."""
    top = task.path / rel_top if rel_top else task.path
    area = _Area()
    if top.is_symlink() or not top.is_dir():
        return area
    prefix = f"{rel_top}/" if rel_top else ""
    try:
        for rel, info in _walk(top, max_entries, skip):
            if stat.S_ISLNK(info.st_mode):
                reason = _symlink_reason(task, root, prefix + rel)
                if reason:
                    reasons.append(reason)
            elif stat.S_ISREG(info.st_mode):
                area.total += info.st_size
                if info.st_size >= MIN_LEAK_BYTES and keep(info.st_size):
                    area.files.append((prefix + rel, info.st_size))
    except _TooMany:
        area.complete = False
        where = f"{rel_top}/" if rel_top else "the task directory"
        reasons.append(Reason(
            "static.too_many_entries",
            f"{where} holds more than {max_entries} entries (files, directories and links); counting "
            "stopped there. A task needs far fewer: pack many small files into an archive",
        ))
    return area


def _symlink_reason(task: Task, root: Path, rel: str) -> Reason | None:
    path = task.path / rel
    try:
        link = os.readlink(path)
        target = (path.parent / link).resolve()
    except (OSError, RuntimeError):
        return Reason("static.symlink_escape", f"{rel} is a symlink that cannot be resolved (a loop?)")
    if target.is_relative_to(root):
        return None
    return Reason("static.symlink_escape", f"{rel} is a symlink to {link}, outside the task")


def _check_files(task: Task, max_context_mb: int, max_tests_mb: int, max_entries: int) -> list[Reason]:
    """Symlink escapes, directory sizes and entry counts, and leaks of solution/tests into the image."""
    root = task.path.resolve()
    tree: list[Reason] = []
    sizes: list[Reason] = []
    areas: dict[str, _Area] = {}
    for name in ("solution", "tests"):
        area = areas[name] = _scan(task, root, name, max_entries, tree, keep=lambda size: True)
        if area.total > max_tests_mb * 1024 * 1024:
            sizes.append(Reason(
                f"static.{name}_too_large",
                f"{name}/ holds {_mib(area.total)} (file sizes as stored, sparse files at their full size); "
                f"the limit is {max_tests_mb} MiB (sandbox.max_tests_mb). It is uploaded into the container "
                "for every trial: keep large data in environment/ instead",
            ))
            area.files.clear()
    secret_sizes = {size for area in areas.values() if area.complete for _, size in area.files}
    env = _scan(task, root, "environment", max_entries, tree, keep=secret_sizes.__contains__)
    if env.total > max_context_mb * 1024 * 1024:
        sizes.append(Reason(
            "static.context_too_large",
            f"environment/ holds {_mib(env.total)}; the limit is {max_context_mb} MiB (sandbox.max_context_mb)",
        ))
    present = frozenset(n for n in ("environment", "solution", "tests")
                        if (task.path / n).is_dir() and not (task.path / n).is_symlink())
    _scan(task, root, "", max_entries, tree, skip=present)
    leaks: list[Reason] = []
    if env.complete and env.total <= max_context_mb * 1024 * 1024:
        secrets = [f for area in areas.values() if area.complete for f in area.files]
        leaks = _leaks(task, env.files, secrets)
    return tree + sizes + leaks


PUBLIC_TESTS = "public"
"""tests/public/: the verifier's copy of tests the agent is shown (their copy in environment/ is no leak)."""


def _leaks(task: Task, env_files: list[tuple[str, int]], secret_files: list[tuple[str, int]]) -> list[Reason]:
    """environment/ files byte-identical to a file of solution/, to test code, or to expected results.

    A tests/ data file reused as an input (tests/input.csv == environment/input.csv) is not a
    leak: the agent sees that input anyway; nor is the verifier's copy of tests the agent is meant
    to see (``tests/public/``, e.g. a repository's own regression tests that test.sh runs as
    committed, whatever the agent did to the repository's copy).
    """
    by_size: dict[int, list[str]] = {}
    for rel, size in secret_files:
        by_size.setdefault(size, []).append(rel)
    digests: dict[str, str | None] = {}

    def digest(rel: str) -> str | None:
        if rel not in digests:
            digests[rel] = _hash_file(task.path / rel)
        return digests[rel]

    reasons = []
    for env_rel, size in sorted(env_files):
        candidates = by_size.get(size)
        if not candidates or digest(env_rel) is None:
            continue
        for secret in sorted(candidates):
            if digest(secret) != digest(env_rel):
                continue
            why = _why_secret(task, secret)
            if why:
                reasons.append(Reason("static.secret_in_image", f"{env_rel} is a copy of {secret}: {why}"))
                break
    return reasons


def _why_secret(task: Task, rel: str) -> str | None:
    """Why a copy of ``rel`` (under solution/ or tests/) in the image gives the answer away; None if it does not."""
    top, _, inner = rel.partition("/")
    if top == "solution":
        return ("the reference solution would be in the image, where the agent can read it; "
                "nothing of solution/ may be in environment/")
    parts = inner.split("/")
    name = parts[-1]
    if len(parts) > 1 and parts[0] == PUBLIC_TESTS:
        return None
    if any(_EXPECTED_NAME.search(part) for part in parts):
        return ("its name marks expected results, which in the image hand the agent the answer; "
                "inputs the tests reuse may be copied, expected outputs may not")
    if name in _CODE_NAMES or Path(name).suffix.lower() in _CODE_SUFFIXES or name.startswith("test_") \
            or Path(name).stem.endswith("_test") or _has_shebang(task.path / rel):
        return ("it is the verifier's code, which in the image shows the agent what is checked "
                "(and how to game it); tests/ code may not be in environment/")
    return None


def _has_shebang(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            return os.read(fd, 2) == b"#!"
        finally:
            os.close(fd)
    except OSError:
        return False


def _hash_file(path: Path) -> str | None:
    """sha256 of a regular file (not a symlink), read in chunks up to its size when opened; None if unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with open(fd, "rb", closefd=True) as fh:
        try:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                return None
            digest, left = hashlib.sha256(), info.st_size
            while left > 0:
                chunk = fh.read(min(HASH_CHUNK, left))
                if not chunk:
                    break
                digest.update(chunk)
                left -= len(chunk)
        except OSError:
            return None
    return digest.hexdigest()


_SECRET_PATH = re.compile(r"(^|[\s/\"'])(solution|tests)(/|\s|$|[\"'])")
_HEREDOC = re.compile(r"<<-?\s*['\"]?[A-Za-z_]")


def check_dockerfile(text: str) -> list[Reason]:
    """Dockerfile rules: a FROM, no heredocs, no host power, no solution/tests copied in."""
    reasons = []
    instructions = dockerfile_instructions(text)
    if not any(word == "FROM" for word, _, _ in instructions):
        reasons.append(Reason("static.dockerfile_no_from", "the Dockerfile has no FROM line"))
    for word, args, line in instructions:
        where = f"Dockerfile line {line}"
        if word in ("RUN", "COPY", "ADD") and _HEREDOC.search(args):
            reasons.append(Reason(
                "static.dockerfile_heredoc",
                f"{where}: heredocs (<<EOF) are not supported by the Docker 20.10 builder; "
                "write the file into environment/ and COPY it, or use printf",
            ))
        if word == "RUN" and re.search(r"--(security|network)\s*=\s*(insecure|host)", args):
            reasons.append(Reason("static.dangerous_option", f"{where}: RUN {args.split()[0]} asks for host privileges"))
        if word in ("COPY", "ADD"):
            sources = [a for a in args.split() if not a.startswith("--")][:-1]
            if any(_SECRET_PATH.search(" " + src) for src in sources):
                reasons.append(Reason(
                    "static.secret_in_image",
                    f"{where}: {word} {args} copies solution/ or tests/ into the image",
                ))
        if any(hint in args for hint in ("/var/run/docker.sock", "/run/docker.sock")):
            reasons.append(Reason("static.dangerous_option", f"{where}: refers to the Docker socket"))
    return reasons


_DANGEROUS_SERVICE_KEYS = {
    "privileged": "privileged mode",
    "devices": "host devices",
    "cap_add": "extra kernel capabilities",
    "security_opt": "security options",
    "pid": "the host PID namespace",
    "ipc": "the host IPC namespace",
    "userns_mode": "the host user namespace",
    "cgroup_parent": "a host cgroup",
}


def check_compose(path: Path, text: str | None = None) -> list[Reason]:
    """A compose file may not ask for host power; aes runs single-container tasks only.

    ``text`` is the file's content when the caller has read it already (size-checked)."""
    name = f"environment/{path.name}"
    try:
        data = yaml.safe_load(text if text is not None else path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        return [Reason("static.compose_invalid", f"{name} is not valid YAML: {exc}")]
    services = (data or {}).get("services") if isinstance(data, dict) else None
    if not isinstance(services, dict):
        return [Reason("static.compose_invalid", f"{name} has no services table")]
    reasons = []
    for service, spec in services.items():
        spec = spec if isinstance(spec, dict) else {}
        for key, what in _DANGEROUS_SERVICE_KEYS.items():
            value = spec.get(key)
            if (value == "host") if key in ("pid", "ipc") else bool(value):
                reasons.append(Reason("static.dangerous_option", f"{name}: service {service!r} asks for {what} ({key})"))
        if spec.get("network_mode") == "host" or spec.get("network") == "host":
            reasons.append(Reason("static.dangerous_option", f"{name}: service {service!r} uses the host network"))
        for volume in spec.get("volumes") or []:
            source = volume.get("source") if isinstance(volume, dict) else str(volume).split(":")[0]
            kind = volume.get("type") if isinstance(volume, dict) else None
            if kind == "bind" or (source and (source.startswith(("/", ".", "~", "$")))):
                reasons.append(Reason("static.dangerous_option", f"{name}: service {service!r} mounts host path {source!r}"))
    if not reasons:
        reasons.append(Reason(
            "static.compose_unsupported",
            f"{name}: multi-container compose environments are not supported by aes; "
            "put everything in environment/Dockerfile",
        ))
    return reasons


def _check_toml_options(task: Task) -> list[Reason]:
    env = task.doc.unwrap().get("environment", {})
    reasons = []
    for key in ("privileged", "devices", "volumes", "mounts", "cap_add", "security_opt"):
        if env.get(key):
            reasons.append(Reason("static.dangerous_option", f"task.toml [environment] {key} is not allowed"))
    return reasons + check_env(task)


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_env(task: Task) -> list[Reason]:
    """``[environment.env]`` and ``[verifier.env]`` may not set start-up variables (:mod:`aes.tasks.startup`):
    they reach the tests' processes after aes has cleared the image's. Every table's names must be
    plain identifiers (``A=B`` as a name would set another variable) and values free of NUL bytes."""
    spec = task.spec
    tables = {"environment.env": spec.env, "verifier.env": spec.verifier_env, "solution.env": spec.solution_env}
    reasons = []
    for table, values in tables.items():
        for name, value in values.items():
            if not _ENV_NAME.match(name) or "\0" in value:
                reasons.append(Reason("static.bad_env_name", (
                    f"task.toml [{table}] {name!r}: variable names are letters, digits and _ (not starting with a "
                    "digit), values hold no NUL byte")))
    for where, what in env_reasons({"environment.env": spec.env, "verifier.env": spec.verifier_env}):
        name = where.split("] ", 1)[1]
        reasons.append(Reason(f"static.startup_env.{name}" if _ENV_NAME.match(name) else "static.startup_env", (
            f"task.toml {where} sets {what}: a start-up variable reaches the tests' processes after aes cleared "
            "the image's, so whoever writes the file it names runs code there. Set search paths the tests need "
            "(PATH, PYTHONPATH) in environment/Dockerfile (ENV), where the verifier's rules apply; loader, shell "
            "and interpreter hooks have no place in a task")))
    return reasons
