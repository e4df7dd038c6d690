"""Surviving a restart of the Docker engine, and refusing to run on a full disk.

A restart of ``dockerd`` stops every container (unless the engine runs with live-restore), so
the trials in flight lose their containers through no fault of the task or the agent. An
:class:`EngineWatch` follows the engine's event stream; the stream breaks whenever the engine
goes away, and each break raises :attr:`EngineWatch.generation`. A trial or build that ends
without a result while the generation moved (or while the engine does not answer) is an
engine casualty: it waits for the engine to come back and runs again from scratch instead of
being recorded as the task's failure.

The disk check reads the free space of Docker's data root (when the engine is on this host)
before trials and builds, and stops the run with a message naming the disk when it runs low,
instead of letting builds and verifiers fail one by one with "no space left on device".
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import threading
import time
from pathlib import Path

from aes.config import SandboxConfig
from aes.sandbox.docker_client import ENGINE_ERRORS, SandboxUnavailable, connect

log = logging.getLogger(__name__)

__all__ = ["ENGINE_ERRORS", "DiskFull", "EngineWatch", "disk_full_message", "engine_watch", "free_gib",
           "is_disk_full"]
_BACKOFF_MAX = 5.0
SHUTDOWN_GRACE_SEC = 15.0
"""How long a container found dead is watched for the engine going away before its death is put
down to what ran in it (dockerd gives containers 10 s to stop when it shuts down)."""
_DISK_CHECK_EVERY = 30.0


class DiskFull(RuntimeError):
    """A disk aes writes to (its run dir or Docker's data root) is full or nearly so."""


def is_disk_full(exc: BaseException) -> bool:
    """True if ``exc`` (or what caused it) is "no space left on device" or an exceeded quota."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(exc).lower()
        if "no space left on device" in text or "database or disk is full" in text:
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def free_gib(path: str | Path) -> float:
    """Free space (GiB) of the file system holding ``path`` (its nearest existing parent)."""
    path = Path(path).resolve()
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free / 2**30


def disk_full_message(path: str | Path, what: str) -> str:
    """What to tell a user whose write to ``path`` failed for lack of space."""
    try:
        free = f"{free_gib(path):.2f} GiB free"
    except OSError:
        free = "free space unknown"
    return (f"the disk is full: {what} ({path}; {free}). Free some space (old runs under outputs/, "
            "`docker image prune -f`, `docker builder prune -f`) and run the same command again: "
            "finished work is kept and the run resumes where it stopped.")


class EngineWatch:
    """Counts the engine's disappearances and waits for it to come back."""

    def __init__(self, cfg: SandboxConfig):
        self.cfg = cfg  # only its docker_host is used: one watcher serves every config of an engine
        self.generation = 0
        self._free: tuple[float, float] | None = None  # (when, GiB free)
        self._root: Path | None = None
        client = connect(cfg)
        root = client.info().get("DockerRootDir")
        host = cfg.docker_host or os.environ.get("DOCKER_HOST") or "unix://"
        if root and host.startswith("unix://") and Path(root).is_dir():  # the engine's disk is ours to watch
            self._root = Path(root)
        self._thread = threading.Thread(target=self._follow, name="aes-engine-watch", daemon=True)
        self._thread.start()

    # -- the event stream ------------------------------------------------------------------
    def _follow(self) -> None:
        while True:
            try:
                stream = connect(self.cfg).api.events(decode=False)
                for _ in stream:
                    pass
            except Exception:  # noqa: BLE001 - any break of the stream counts
                pass
            self.generation += 1  # only this thread writes it
            log.warning("lost the Docker engine's event stream; trials in flight will run again")
            self._await_ping(None)

    def _ping(self) -> bool:
        try:
            return bool(connect(self.cfg).ping())
        except Exception:  # noqa: BLE001
            return False

    def _await_ping(self, timeout: float | None) -> bool:
        start, delay = time.monotonic(), 0.2
        while not self._ping():
            if timeout is not None and time.monotonic() - start > timeout:
                return False
            time.sleep(delay)
            delay = min(delay * 2, _BACKOFF_MAX)
        return True

    # -- for trials and builds -------------------------------------------------------------
    def lost_since(self, generation: int, grace: float = 0.0) -> bool:
        """Did the engine go away since ``generation`` was read (or is it away now)?

        ``grace``: keep watching that long. A stopping engine kills its containers first and
        answers for a little while after, so a container found dead may be the first sign.
        """
        deadline = time.monotonic() + grace
        while True:
            if self.generation != generation or not self._ping():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.25)

    def wait(self, timeout: float) -> None:
        """Block until the engine answers again; :class:`SandboxUnavailable` after ``timeout``
        seconds (``sandbox.engine_wait_sec``)."""
        start = time.monotonic()
        if not self._await_ping(timeout):
            raise SandboxUnavailable(
                f"the Docker engine went away and did not come back within {timeout:.0f} s "
                "(sandbox.engine_wait_sec). Start it again and rerun the same command: the run "
                "resumes where it stopped.")
        waited = time.monotonic() - start
        if waited > 1:
            log.warning("the Docker engine is back after %.0f s", waited)

    def check_disk(self, min_free_gib: float, force: bool = False) -> None:
        """Raise :class:`DiskFull` when Docker's data root has less than ``min_free_gib``
        (``sandbox.min_free_disk_gib``) free; measured at most every 30 s unless ``force``."""
        if self._root is None or min_free_gib <= 0:
            return
        now = time.monotonic()
        if force or self._free is None or now - self._free[0] > _DISK_CHECK_EVERY:
            self._free = (now, free_gib(self._root))
        free = self._free[1]
        if free < min_free_gib:
            self._free = None  # measure again next time: space may have been freed
            raise DiskFull(
                f"the disk of Docker's data root {self._root} has {free:.2f} GiB free, less than "
                f"sandbox.min_free_disk_gib={min_free_gib:g}: builds and trials would fail with "
                "'no space left on device'. Free space (`docker image prune -f`, `docker builder "
                "prune -f`, old runs under outputs/) and rerun the same command: the run resumes "
                "where it stopped.")


_WATCHES: dict[str | None, EngineWatch] = {}
_WATCHES_LOCK = threading.Lock()


def engine_watch(cfg: SandboxConfig) -> EngineWatch:
    """The process's one watcher of the configured engine."""
    with _WATCHES_LOCK:
        if cfg.docker_host not in _WATCHES:
            _WATCHES[cfg.docker_host] = EngineWatch(cfg)
        return _WATCHES[cfg.docker_host]
