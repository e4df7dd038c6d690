"""Static admission checks (DESIGN.md admission step 1): nothing is built or run.

Checks the build context, the Dockerfile and any compose file for what would leak
the answer into the image or give a container power over the host.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from aes.tasks.task import Task

MAX_FILE_BYTES_HASHED = 8 * 1024 * 1024


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


def check_task(task: Task, max_context_mb: int = 256) -> list[Reason]:
    """All static checks; an empty list means the task passed."""
    reasons = _check_tree(task)
    reasons += _check_context(task, max_context_mb)
    if task.dockerfile.is_file():
        reasons += check_dockerfile(task.dockerfile.read_text(encoding="utf-8", errors="replace"))
    for name in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml"):
        if (task.environment_dir / name).is_file():
            reasons += check_compose(task.environment_dir / name)
    reasons += _check_toml_options(task)
    return reasons


def _check_tree(task: Task) -> list[Reason]:
    reasons = []
    root = task.path.resolve()
    for dirpath, dirnames, filenames in os.walk(task.path):
        for entry in dirnames + filenames:
            path = Path(dirpath) / entry
            if path.is_symlink():
                target = (path.parent / os.readlink(path)).resolve()
                if not target.is_relative_to(root):
                    reasons.append(Reason(
                        "static.symlink_escape",
                        f"{path.relative_to(task.path)} is a symlink to {os.readlink(path)}, outside the task",
                    ))
    return reasons


def _digest(path: Path) -> str | None:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_FILE_BYTES_HASHED:
            return None
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _check_context(task: Task, max_context_mb: int) -> list[Reason]:
    """The image must not contain the tests or the solution, and the context must be sane."""
    if not task.environment_dir.is_dir():
        return []
    secret: dict[str, str] = {}
    for folder in (task.solution_dir, task.tests_dir):
        for file in folder.rglob("*"):
            digest = _digest(file)
            if digest and file.stat().st_size > 0:
                secret[digest] = str(file.relative_to(task.path))
    reasons, total = [], 0
    for file in task.environment_dir.rglob("*"):
        if file.is_symlink() or not file.is_file():
            continue
        total += file.stat().st_size
        digest = _digest(file)
        if digest in secret:
            reasons.append(Reason(
                "static.secret_in_image",
                f"environment/{file.relative_to(task.environment_dir)} is a copy of {secret[digest]}; "
                "solution/ and tests/ must not be in the image",
            ))
    if total > max_context_mb * 1024 * 1024:
        reasons.append(Reason(
            "static.context_too_large",
            f"environment/ holds {total / 2**20:.0f} MiB; the limit is {max_context_mb} MiB",
        ))
    return reasons


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


def check_compose(path: Path) -> list[Reason]:
    """A compose file may not ask for host power; aes runs single-container tasks only."""
    name = f"environment/{path.name}"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
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
    return reasons
