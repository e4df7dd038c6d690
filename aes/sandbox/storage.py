"""A watchdog on the disk each trial container writes.

overlay2 on ext4 (the usual Docker setup) has no per-container quota, so ``storage_mb`` cannot
be enforced by the engine. Instead one thread measures every watched container's writable layer
(``SizeRw``) every ``sandbox.storage_poll_sec`` and kills a container that has written more than
its limit; the trial then ends as ``storage_exceeded`` and the attempt scores 0. What can be
written between two measurements is bounded by the disk's write speed times the poll interval;
``sandbox.min_free_disk_gib`` still stops the run before the disk fills.
"""

from __future__ import annotations

import logging
import threading
import time

import docker.errors

from aes.sandbox.docker_client import ENGINE_ERRORS

log = logging.getLogger(__name__)


class StorageWatch:
    """Kills watched containers whose writable layer outgrows their limit."""

    def __init__(self, client, poll_sec: float):
        self.client = client
        self.poll_sec = poll_sec
        self._limits: dict[str, int] = {}
        self._exceeded: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="aes-storage-watch", daemon=True)
        self._thread.start()

    def watch(self, container, limit_mb: int) -> None:
        with self._lock:
            self._limits[container.id] = limit_mb << 20
        self._wake.set()

    def forget(self, container) -> None:
        with self._lock:
            self._limits.pop(container.id, None)
            self._exceeded.pop(container.id, None)

    def exceeded(self, container) -> tuple[int, int] | None:
        """(bytes written, limit) if ``container`` was killed for its storage, else None."""
        with self._lock:
            return self._exceeded.get(container.id)

    def check(self) -> None:
        """Measure every watched container once (the loop's body; tests call it directly)."""
        with self._lock:
            ids = [cid for cid in self._limits if cid not in self._exceeded]
        if not ids:
            return
        try:
            rows = self.client.api.containers(all=True, size=True, filters={"id": ids})
        except (docker.errors.APIError, *ENGINE_ERRORS):
            return
        present = {row["Id"] for row in rows}
        for row in rows:
            size = int(row.get("SizeRw") or 0)
            with self._lock:
                limit = self._limits.get(row["Id"])
            if limit is None or size <= limit:
                continue
            with self._lock:
                self._exceeded[row["Id"]] = (size, limit)
            log.warning("container %s wrote %d MiB, over its %d MiB storage limit: killed",
                        row["Id"][:12], size >> 20, limit >> 20)
            try:
                self.client.api.kill(row["Id"])
            except (docker.errors.APIError, *ENGINE_ERRORS):
                pass
        with self._lock:
            for cid in ids:
                if cid not in present:
                    self._limits.pop(cid, None)

    def _loop(self) -> None:
        while True:
            if not self._limits:
                self._wake.wait()
                self._wake.clear()
            time.sleep(self.poll_sec)
            try:
                self.check()
            except Exception as exc:  # noqa: BLE001 - the watchdog must outlive any one failure
                log.warning("storage watchdog: %s", exc)
