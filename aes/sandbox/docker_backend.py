"""The Docker sandbox: build a task's image, start a limited container for one trial."""

from __future__ import annotations

import logging
import threading

import docker.errors

from aes.config import SandboxConfig
from aes.sandbox.container import Container
from aes.sandbox.docker_client import connect, owner_labels, reap_orphans
from aes.sandbox.images import BuildResult, ImageBuilder
from aes.tasks import Task

log = logging.getLogger(__name__)

_reaped: set[str | None] = set()
_reap_lock = threading.Lock()


class DockerSandbox:
    """Builds task images and starts trial containers with the task's limits."""

    def __init__(self, cfg: SandboxConfig):
        self.cfg = cfg
        self.client = connect(cfg)
        self.builder = ImageBuilder(cfg)
        info = self.client.info()
        self.host_cpus = float(info.get("NCPU") or 1)
        self.host_memory_mb = int((info.get("MemTotal") or 0) // 2**20) or None
        self._clamp_warned: set[str] = set()
        with _reap_lock:
            if cfg.reap_on_start and cfg.docker_host not in _reaped:
                _reaped.add(cfg.docker_host)
                reap_orphans(cfg)

    def build(self, task: Task) -> BuildResult:
        return self.builder.build(task)

    def limits(self, task: Task) -> tuple[float, int]:
        """(cpus, memory MiB) for a trial of ``task``, clamped to what the host has."""
        cpus = task.spec.cpus or self.cfg.default_cpus
        memory = task.spec.memory_mb or self.cfg.default_memory_mb
        if cpus > self.host_cpus:
            self._warn_once("cpus", f"task asks for {cpus:g} CPUs; this host has {self.host_cpus:g}: using {self.host_cpus:g}")
            cpus = self.host_cpus
        if self.host_memory_mb and memory > self.host_memory_mb:
            self._warn_once("mem", f"task asks for {memory} MiB; this host has {self.host_memory_mb}: using that")
            memory = self.host_memory_mb
        return cpus, memory

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._clamp_warned:
            self._clamp_warned.add(key)
            log.warning(message)

    def start(self, image: str, task: Task, role: str = "trial") -> Container:
        """Start a container from ``image`` that sleeps until commands are exec'd into it."""
        cpus, memory = self.limits(task)
        network = "none" if task.spec.network_mode in ("no-network", "allowlist") else "bridge"
        try:
            container = self.client.containers.run(
                image,
                command=["sh", "-c", "sleep infinity"],
                detach=True,
                labels=owner_labels(role, task.name),
                nano_cpus=int(cpus * 1e9),
                mem_limit=f"{memory}m",
                memswap_limit=f"{memory}m",
                pids_limit=self.cfg.pids_limit,
                network_mode=network,
                working_dir=task.spec.workdir,
                environment=task.spec.env or None,
                init=True,
            )
        except docker.errors.APIError as exc:
            raise SandboxError(f"could not start a container from {image}: {exc.explanation or exc}") from None
        return Container(self.client, container, self.cfg.output_limit_bytes, workdir=task.spec.workdir)


class SandboxError(RuntimeError):
    """The sandbox failed (not the task): the engine refused or went away."""
