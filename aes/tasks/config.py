"""task.toml: parse every schema variant found in public Harbor task sets into one spec.

Harbor task sets in the wild use several dialects of task.toml: the current one
(``[task]`` package info, ``memory_mb``, ``network_mode``), and older ones
(top-level ``version``, ``memory = "2G"``, ``storage = "10G"``,
``allow_internet = true``). :func:`parse_task_toml` maps them onto one
:class:`TaskSpec` with Harbor's semantics; features aes cannot run (multiple steps,
a separate verifier container, Windows, GPUs) are rejected with a reason.
The original document is kept, so writing a task back preserves unknown keys.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from aes.tasks.mcp import McpServerSpec, parse_mcp_servers

NETWORK_MODES = ("public", "no-network", "allowlist")
TASK_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*$")


class TaskConfigError(ValueError):
    """task.toml cannot be interpreted; ``code`` is the machine-readable reason."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class TaskSpec:
    """What a task asks of the sandbox, normalised from any task.toml dialect."""

    name: str | None = None
    version: str | None = None
    description: str = ""
    keywords: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    agent_timeout_sec: float | None = None
    agent_user: str | None = None
    verifier_timeout_sec: float | None = None
    verifier_user: str | None = None
    verifier_env: dict[str, str] = field(default_factory=dict)
    solution_env: dict[str, str] = field(default_factory=dict)
    build_timeout_sec: float | None = None
    docker_image: str | None = None
    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    gpus: int = 0
    """``[environment] gpus``: NVIDIA GPUs the task's containers get where the host has them
    (aes.sandbox.gpu); without them the task runs on its CPU path."""
    network_mode: str = "public"
    allowed_hosts: list[str] = field(default_factory=list)
    workdir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    mcp_servers: list[McpServerSpec] = field(default_factory=list)
    """``[[environment.mcp_servers]]``: MCP servers the agent reaches (aes.tasks.mcp, aes.agents.mcp)."""
    notes: list[str] = field(default_factory=list)
    """Legacy fields that were mapped, for the validation report."""


def _size_mb(value: Any, key: str) -> int:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    match = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]?)i?B?\s*", str(value), flags=re.IGNORECASE)
    if not match:
        raise TaskConfigError("task_toml.bad_value", f"[environment] {key} = {value!r} is not a size like '2G' or '512M'")
    number, unit = float(match.group(1)), match.group(2).upper()
    return int(number * {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[unit])


def _number(table: dict[str, Any], key: str, section: str, positive: bool = True) -> float | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TaskConfigError("task_toml.bad_value", f"[{section}] {key} must be a number, got {value!r}")
    if positive and value <= 0:
        raise TaskConfigError("task_toml.bad_value", f"[{section}] {key} must be > 0, got {value!r}")
    return float(value)


def _table(doc: dict[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise TaskConfigError("task_toml.bad_value", f"'{key}' must be a table ([{key}]), got {type(value).__name__}")
    return value


def _str_dict(table: dict[str, Any], key: str, section: str) -> dict[str, str]:
    value = table.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, (str, int, float)) for v in value.values()):
        raise TaskConfigError("task_toml.bad_value", f"[{section}] {key} must be a table of strings")
    return {str(k): str(v) for k, v in value.items()}


def parse_task_toml(text: str) -> tuple[TaskSpec, tomlkit.TOMLDocument]:
    """Parse task.toml text; raises :class:`TaskConfigError` with a reason code."""
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise TaskConfigError("task_toml.syntax", f"task.toml is not valid TOML: {exc}") from None
    data = doc.unwrap()
    _reject_unsupported(data)
    spec = TaskSpec()
    task = _table(data, "task")
    if task:
        spec.name = task.get("name")
        if not isinstance(spec.name, str) or not TASK_NAME.match(spec.name) or ".." in spec.name:
            raise TaskConfigError("task_toml.bad_name", f"[task] name must look like 'org/name', got {spec.name!r}")
        spec.version = None if task.get("version") is None else str(task["version"])
        spec.description = str(task.get("description", ""))
        spec.keywords = [str(k) for k in task.get("keywords", [])]
    spec.metadata = _table(data, "metadata")

    agent, verifier = _table(data, "agent"), _table(data, "verifier")
    spec.agent_timeout_sec = _number(agent, "timeout_sec", "agent")
    spec.agent_user = None if agent.get("user") is None else str(agent["user"])
    spec.verifier_timeout_sec = _number(verifier, "timeout_sec", "verifier")
    spec.verifier_user = None if verifier.get("user") is None else str(verifier["user"])
    spec.verifier_env = _str_dict(verifier, "env", "verifier")
    spec.solution_env = _str_dict(_table(data, "solution"), "env", "solution")

    env = _table(data, "environment")
    spec.build_timeout_sec = _number(env, "build_timeout_sec", "environment")
    spec.cpus = _number(env, "cpus", "environment")
    spec.gpus = _gpus(env)
    spec.docker_image = env.get("docker_image")
    spec.workdir = env.get("workdir")
    if spec.workdir is not None and not str(spec.workdir).startswith("/"):
        raise TaskConfigError("task_toml.bad_value", f"[environment] workdir must be absolute, got {spec.workdir!r}")
    spec.env = _str_dict(env, "env", "environment")
    spec.mcp_servers = parse_mcp_servers(env)
    for key in ("memory", "storage"):
        mb_key = f"{key}_mb"
        value = env.get(mb_key)
        if value is None and key in env:
            value = _size_mb(env[key], key)
            spec.notes.append(f"legacy [environment] {key} = {env[key]!r} read as {mb_key} = {value}")
        elif value is not None:
            value = int(_number(env, mb_key, "environment") or 0)
        setattr(spec, mb_key, value)
    spec.network_mode, spec.allowed_hosts = _network(env, spec.notes)
    return spec, doc


def _network(env: dict[str, Any], notes: list[str]) -> tuple[str, list[str]]:
    mode = env.get("network_mode")
    if mode is None and "allow_internet" in env:
        allow = env["allow_internet"]
        if not isinstance(allow, bool):
            raise TaskConfigError("task_toml.bad_value", f"[environment] allow_internet must be true or false, got {allow!r}")
        mode = "public" if allow else "no-network"
        notes.append(f"legacy [environment] allow_internet = {str(allow).lower()} read as network_mode = {mode!r}")
    mode = mode or "public"
    if mode not in NETWORK_MODES:
        raise TaskConfigError("task_toml.bad_value", f"[environment] network_mode must be one of {NETWORK_MODES}, got {mode!r}")
    hosts = env.get("allowed_hosts") or []
    if hosts and mode != "allowlist":
        raise TaskConfigError("task_toml.bad_value", "[environment] allowed_hosts is only valid with network_mode = 'allowlist'")
    return mode, [str(h) for h in hosts]


def _reject_unsupported(data: dict[str, Any]) -> None:
    if data.get("steps"):
        raise TaskConfigError("task_toml.unsupported", "multi-step tasks ([[steps]]) are not supported by aes")
    verifier = data.get("verifier", {}) if isinstance(data.get("verifier"), dict) else {}
    if verifier.get("environment") or verifier.get("environment_mode") == "separate":
        raise TaskConfigError("task_toml.unsupported", "a separate verifier environment is not supported by aes")
    env = data.get("environment", {}) if isinstance(data.get("environment"), dict) else {}
    if str(env.get("os", "linux")).lower() != "linux":
        raise TaskConfigError("task_toml.unsupported", f"[environment] os = {env['os']!r}: only linux tasks run in aes")
    if env.get("tpu"):
        raise TaskConfigError("task_toml.unsupported", "tasks that need TPUs are not supported by the aes sandbox")


def _gpus(env: dict[str, Any]) -> int:
    value = env.get("gpus") or 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TaskConfigError("task_toml.bad_value", f"[environment] gpus must be a whole number >= 0, got {value!r}")
    return value


def render_task_toml(spec: TaskSpec, doc: tomlkit.TOMLDocument | None = None) -> str:
    """task.toml text for ``spec``; keys of ``doc`` that the spec does not own are kept."""
    doc = doc if doc is not None else tomlkit.document()
    if spec.name:
        task = doc.setdefault("task", tomlkit.table())
        task["name"] = spec.name
        if spec.version is not None:
            task["version"] = spec.version
        task["description"] = spec.description
        task["keywords"] = spec.keywords
    if spec.metadata:
        meta = doc.setdefault("metadata", tomlkit.table())
        for key, value in spec.metadata.items():
            meta[key] = value
    for section, values in (
        ("agent", {"timeout_sec": spec.agent_timeout_sec}),
        ("verifier", {"timeout_sec": spec.verifier_timeout_sec}),
        ("environment", {
            "build_timeout_sec": spec.build_timeout_sec, "cpus": spec.cpus,
            "memory_mb": spec.memory_mb, "storage_mb": spec.storage_mb, "gpus": spec.gpus or None,
            "network_mode": spec.network_mode, "workdir": spec.workdir,
        }),
    ):
        table = doc.setdefault(section, tomlkit.table())
        for key, value in values.items():
            if value is not None:
                table[key] = value
    env = doc.get("environment", {})
    for legacy in ("memory", "storage", "allow_internet"):
        env.pop(legacy, None)
    return tomlkit.dumps(doc)
