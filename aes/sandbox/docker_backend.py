"""The Docker sandbox: build a task's image, start a limited container for one trial."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Callable, TypeVar

import docker.errors

from aes.config import SandboxConfig
from aes.sandbox.container import Container
from aes.sandbox.docker_client import (
    LABEL_MANAGED,
    LABEL_PID,
    connect,
    owner_labels,
    reap_orphans,
)
from aes.sandbox.engine import ENGINE_ERRORS, SHUTDOWN_GRACE_SEC, engine_watch
from aes.sandbox.images import BuildResult, ImageBuilder
from aes.sandbox.verifier_toolchain import MOUNT, PRELOAD_GUARD, build_toolchain
from aes.tasks import Task

log = logging.getLogger(__name__)
T = TypeVar("T")

_reaped: set[str | None] = set()
_reap_lock = threading.Lock()


class DockerSandbox:
    """Builds task images and starts trial containers with the task's limits."""

    def __init__(self, cfg: SandboxConfig):
        self.cfg = cfg
        self.client = connect(cfg)
        self.builder = ImageBuilder(cfg)
        self.engine = engine_watch(cfg)
        info = self.client.info()
        self.host_cpus = float(info.get("NCPU") or 1)
        self.host_memory_mb = int((info.get("MemTotal") or 0) // 2**20) or None
        self._clamp_warned: set[str] = set()
        with _reap_lock:
            if cfg.reap_on_start and cfg.docker_host not in _reaped:
                _reaped.add(cfg.docker_host)
                reap_orphans(cfg)
        self._toolchain: Path | None = None

    def toolchain_mounts(self) -> dict[str, tuple[str, str]]:
        """Read-only mounts of the trusted verifier toolchain (built on first use)."""
        if not self.cfg.trusted_verifier:
            return {}
        if self._toolchain is None:
            root = Path(self.cfg.verifier_dir) if self.cfg.verifier_dir else default_verifier_dir()
            self._toolchain = build_toolchain(self.client, self.cfg.base_image, root)
        return {str(self._toolchain): (MOUNT, "ro"),
                str(self._toolchain / PRELOAD_GUARD): ("/etc/ld.so.preload", "ro")}

    def build(self, task: Task) -> BuildResult:
        """Build (or reuse) ``task``'s image; a build cut short by an engine restart runs again,
        and a failure for lack of disk space stops the run (:class:`DiskFull`) rather than
        rejecting the task."""
        def suspect(result: BuildResult) -> float | None:
            if result.image:
                return None
            return SHUTDOWN_GRACE_SEC if result.reason and "stream broke" in result.reason.message else 0.0

        result, _ = self.through_restarts(f"{task.name}: image build", lambda: self.builder.build(task), suspect)
        if result.reason and "no space left on device" in result.reason.message.lower():
            self.engine.check_disk(self.cfg.min_free_disk_gib, force=True)
        return result

    def through_restarts(self, what: str, attempt: Callable[[], T], suspect: Callable[[T], float | None],
                         renew: Callable[[], None] | None = None,
                         cfg: SandboxConfig | None = None) -> tuple[T, int]:
        """``attempt()`` again, up to ``sandbox.engine_retries`` times, while the Docker engine
        goes away under it; the result and how many times it was run again.

        ``suspect(result)``: None when the result stands whatever the engine did, else how long
        to watch for a stopping engine before the result counts. ``renew`` runs after the engine
        is back, before the next attempt. Checks the disk first (:class:`DiskFull`). ``cfg``: the
        caller's sandbox settings (retries, disk floor), default this sandbox's.
        """
        cfg = cfg or self.cfg
        for retry in range(cfg.engine_retries + 1):
            self.engine.check_disk(cfg.min_free_disk_gib)
            generation = self.engine.generation
            try:
                result = attempt()
            except ENGINE_ERRORS as exc:
                why = f"{type(exc).__name__}: {exc}"
            else:
                grace = suspect(result)
                if grace is None or not self.engine.lost_since(generation, grace):
                    return result, retry
                why = "its container stopped"
            log.warning("%s lost to the Docker engine going away (%s); running it again", what, why)
            self.recover()
            if renew is not None:
                renew()
        raise SandboxError(f"{what}: the Docker engine went away during each of {cfg.engine_retries + 1} runs")

    def recover(self) -> None:
        """After losing the engine: wait for it, then remove this process's stopped containers
        (an engine restart stops them all; their trials run again in new ones)."""
        self.engine.wait(self.cfg.engine_wait_sec)
        mine = {"label": [f"{LABEL_MANAGED}=true", f"{LABEL_PID}={os.getpid()}"], "status": "exited"}
        try:
            for info in self.client.api.containers(all=True, filters=mine):
                try:
                    self.client.api.remove_container(info["Id"], force=True, v=True)
                except docker.errors.APIError:
                    pass
        except (docker.errors.APIError, *ENGINE_ERRORS) as exc:
            log.warning("could not list stopped containers after the engine came back: %s", exc)

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
        """Start a trial container from ``image`` with the task's limits."""
        cpus, memory = self.limits(task)
        network = "none" if task.spec.network_mode in ("no-network", "allowlist") else "bridge"
        return self.run_container(image, cpus=cpus, memory_mb=memory, network=network,
                                  workdir=task.spec.workdir, env=task.spec.env, role=role, label=task.name,
                                  mounts=self.toolchain_mounts())

    def run_container(self, image: str, *, cpus: float, memory_mb: int, network: str = "none",
                      workdir: str | None = None, env: dict[str, str] | None = None,
                      mounts: dict[str, tuple[str, str]] | None = None, role: str = "trial",
                      label: str | None = None) -> Container:
        """Start a labelled container that sleeps until commands are exec'd into it.

        ``mounts`` maps host paths to (container path, "ro"|"rw") bind mounts.
        """
        cpus = min(cpus, self.host_cpus)
        if self.host_memory_mb:
            memory_mb = min(memory_mb, self.host_memory_mb)
        volumes = {host: {"bind": target, "mode": mode} for host, (target, mode) in (mounts or {}).items()}
        try:
            container = self.client.containers.run(
                image,
                command=["sh", "-c", "sleep infinity"],
                detach=True,
                labels=owner_labels(role, label),
                nano_cpus=int(cpus * 1e9),
                mem_limit=f"{memory_mb}m",
                memswap_limit=f"{memory_mb}m",
                pids_limit=self.cfg.pids_limit,
                network_mode=network,
                working_dir=workdir,
                environment=env or None,
                volumes=volumes or None,
                init=True,
            )
        except docker.errors.APIError as exc:
            raise SandboxError(f"could not start a container from {image}: {exc.explanation or exc}") from None
        return Container(self.client, container, self.cfg.output_limit_bytes, workdir=workdir)


def default_verifier_dir() -> Path:
    system = Path("/var/lib/aes/verifier")
    try:
        system.mkdir(parents=True, exist_ok=True)
        return system
    except PermissionError:
        return Path.home() / ".cache" / "aes" / "verifier"


class SandboxError(RuntimeError):
    """The sandbox failed (not the task): the engine refused or went away."""
