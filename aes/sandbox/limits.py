"""The limits a trial runs under: what the task declares, bounded by what aes allows.

A task's declared timeouts and resources are taken as they are up to the ``sandbox.max_*``
bounds; beyond them they are clamped (with a note), so a task declaring
``build_timeout_sec = 1e300`` or ``timeout_sec = 1e9`` still ends in bounded time.
"""

from __future__ import annotations

from aes.config import SandboxConfig
from aes.sandbox.buildcaps import BuildCaps


def _bounded(value: float | None, default: float, bound: float) -> float:
    return min(value if value is not None else default, bound)


def build_timeout(cfg: SandboxConfig, task) -> float:
    return _bounded(task.spec.build_timeout_sec, cfg.default_build_timeout_sec, cfg.max_build_timeout_sec)


def agent_timeout(cfg: SandboxConfig, task) -> float:
    return _bounded(task.spec.agent_timeout_sec, cfg.default_agent_timeout_sec, cfg.max_agent_timeout_sec)


def verifier_timeout(cfg: SandboxConfig, task) -> float:
    return _bounded(task.spec.verifier_timeout_sec, cfg.default_verifier_timeout_sec, cfg.max_verifier_timeout_sec)


def storage_mb(cfg: SandboxConfig, task) -> int:
    return int(_bounded(task.spec.storage_mb, cfg.default_storage_mb, cfg.max_storage_mb))


def clamp_notes(cfg: SandboxConfig, task) -> list[str]:
    """One line per declared value that aes bounds."""
    checks = (
        ("[environment] build_timeout_sec", task.spec.build_timeout_sec, cfg.max_build_timeout_sec,
         "sandbox.max_build_timeout_sec"),
        ("[agent] timeout_sec", task.spec.agent_timeout_sec, cfg.max_agent_timeout_sec, "sandbox.max_agent_timeout_sec"),
        ("[verifier] timeout_sec", task.spec.verifier_timeout_sec, cfg.max_verifier_timeout_sec,
         "sandbox.max_verifier_timeout_sec"),
        ("[environment] cpus", task.spec.cpus, cfg.max_cpus, "sandbox.max_cpus"),
        ("[environment] memory_mb", task.spec.memory_mb, cfg.max_memory_mb, "sandbox.max_memory_mb"),
        ("[environment] storage_mb", task.spec.storage_mb, cfg.max_storage_mb, "sandbox.max_storage_mb"),
    )
    return [f"{key} = {value:g} exceeds {setting} = {bound:g}: {bound:g} is used"
            for key, value, bound, setting in checks if value is not None and value > bound]


def build_caps(cfg: SandboxConfig, host_cpus: float, host_memory_mb: int) -> BuildCaps:
    """The caps of an image build's steps: ``sandbox.build_*`` bounded by the host (0: no cap)."""
    memory = cfg.build_memory_mb
    if memory and host_memory_mb:
        memory = min(memory, host_memory_mb)
    cpus = min(cfg.build_cpus, host_cpus) if cfg.build_cpus else 0.0
    return BuildCaps(memory_mb=memory, cpus=cpus, pids=cfg.build_pids_limit)
