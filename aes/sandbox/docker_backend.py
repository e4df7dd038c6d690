"""The Docker sandbox: build a task's image, start a limited container for one trial."""

from __future__ import annotations

import atexit
import logging
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Callable, TypeVar

import docker.errors

from aes.config import SandboxConfig
from aes.errors import InfrastructureError
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
from aes.sandbox import gpu, limits
from aes.sandbox.network import isolated_network
from aes.sandbox.storage import StorageWatch
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
        self.network = isolated_network(self.client, cfg)
        self.storage = StorageWatch(self.client, cfg.storage_poll_sec)
        self._removals = ThreadPoolExecutor(max_workers=4, thread_name_prefix="aes-remove")
        self._pending: set[Future] = set()
        self._pending_lock = threading.Lock()
        atexit.register(self.drain)

    def discard(self, container: Container) -> None:
        """Remove ``container`` in the background: a trial's result does not wait for its teardown
        (:meth:`drain` waits for every removal; it runs at exit too)."""
        self.storage.forget(container)
        future = self._removals.submit(container.remove)
        with self._pending_lock:
            self._pending.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: Future) -> None:
        with self._pending_lock:
            self._pending.discard(future)

    def drain(self, timeout: float = 60.0) -> None:
        """Wait until every container handed to :meth:`discard` is removed."""
        with self._pending_lock:
            pending = list(self._pending)
        wait(pending, timeout=timeout)

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
        """(cpus, memory MiB) for a trial of ``task``: bounded by ``sandbox.max_*`` and the host."""
        cpus = min(task.spec.cpus or self.cfg.default_cpus, self.cfg.max_cpus)
        memory = min(task.spec.memory_mb or self.cfg.default_memory_mb, self.cfg.max_memory_mb)
        if cpus > self.host_cpus:
            self._warn_once("cpus", f"task asks for {cpus:g} CPUs; this host has {self.host_cpus:g}: using {self.host_cpus:g}")
            cpus = self.host_cpus
        if self.host_memory_mb and memory > self.host_memory_mb:
            self._warn_once("mem", f"task asks for {memory} MiB; this host has {self.host_memory_mb}: using that")
            memory = self.host_memory_mb
        return cpus, memory

    def storage_limit_mb(self, task: Task) -> int:
        """The writable-layer limit of a trial container of ``task`` (MiB)."""
        return limits.storage_mb(self.cfg, task)

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._clamp_warned:
            self._clamp_warned.add(key)
            log.warning(message)

    def start(self, image: str, task: Task, role: str = "trial", *, entrypoint: list[str] | None = None,
              env: dict[str, str] | None = None, workdir: str | None = None) -> Container:
        """Start a container of ``image`` with the task's limits, watched for its storage use.

        The agent's container keeps the image's ENTRYPOINT (as Harbor does); ``entrypoint`` (the
        verifier's) replaces it and the image's CMD and HEALTHCHECK. Either way the container
        stops by itself once its longest possible trial is over, should aes die before removing it.
        """
        cpus, memory = self.limits(task)
        gpus = gpu.plan(task.spec.gpus)
        if task.spec.gpus and gpus.count < task.spec.gpus:
            self._warn_once(f"gpus:{task.name}", f"{task.name} asks for {task.spec.gpus} GPU(s); {gpus.note} on this "
                                                 "host: it runs on what it gets (a CPU path where the task has one)")
        network = "none" if task.spec.network_mode in ("no-network", "allowlist") else "bridge"
        lifetime = int(2 * (limits.agent_timeout(self.cfg, task) + limits.verifier_timeout(self.cfg, task)) + 600)
        container = self.run_container(
            image, cpus=cpus, memory_mb=memory, network=network,
            workdir=workdir if workdir is not None else task.spec.workdir,
            env=env if env is not None else task.spec.env, role=role, label=task.name,
            entrypoint=[*entrypoint, str(lifetime)] if entrypoint else None,
            command=None if entrypoint else ["sh", "-c", f"sleep {lifetime}"], device_requests=gpus.device_requests())
        self.storage.watch(container, self.storage_limit_mb(task))
        return container

    def run_container(self, image: str, *, cpus: float, memory_mb: int, network: str = "none",
                      workdir: str | None = None, env: dict[str, str] | None = None,
                      mounts: dict[str, tuple[str, str]] | None = None, role: str = "trial",
                      label: str | None = None, entrypoint: list[str] | None = None,
                      command: list[str] | None = None, device_requests: list | None = None) -> Container:
        """Start a labelled container that sleeps until commands are exec'd into it.

        ``mounts`` maps host paths to (container path, "ro"|"rw") bind mounts. ``network``:
        ``none``, or ``bridge`` for a network (aes's isolated bridge when ``sandbox.isolate_host``).
        """
        cpus = min(cpus, self.host_cpus)
        if self.host_memory_mb:
            memory_mb = min(memory_mb, self.host_memory_mb)
        if network == "bridge":
            network = self.network
        volumes = {host: {"bind": target, "mode": mode} for host, (target, mode) in (mounts or {}).items()}
        extra = {"entrypoint": entrypoint, "healthcheck": {"test": ["NONE"]}} if entrypoint else {}
        if device_requests:
            extra["device_requests"] = device_requests
        try:
            container = self.client.containers.create(
                image,
                command=command if command is not None else (None if entrypoint else ["sh", "-c", "sleep infinity"]),
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
                **extra,
            )
        except docker.errors.APIError as exc:
            raise SandboxError(f"could not create a container from {image}: {exc.explanation or exc}") from None
        try:
            container.start()
        except docker.errors.APIError as exc:
            try:
                container.remove(force=True)
            except docker.errors.APIError:
                pass
            raise SandboxError(f"could not start a container from {image}: {exc.explanation or exc}") from None
        return Container(self.client, container, self.cfg.output_limit_bytes, workdir=workdir)


class SandboxError(InfrastructureError):
    """The sandbox failed (not the task): the engine refused or went away."""
