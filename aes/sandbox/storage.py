"""A watchdog on the disk each trial container writes.

overlay2 on ext4 (the usual Docker setup) has no per-container quota, so ``storage_mb`` cannot
be enforced by the engine. Instead one thread measures every watched container's writable layer
every ``sandbox.storage_poll_sec`` and kills a container that has written more than its limit;
the trial then ends as ``storage_exceeded`` and the attempt scores 0.

What counts is the disk a container uses: the blocks its writable layer holds (hard links once),
read from the layer's directory on this host. A sparse file of tens of GiB that holds no data
(tests that fake a full disk do this) costs nothing and is not a reason to kill; real data is.
The engine's own figure (``SizeRw``) adds up apparent sizes; it is used only where the layer's
directory cannot be read from here (an engine on another host, another storage driver). A walk
that takes long (a layer of very many files) is repeated less often, so the watchdog never costs
more than about a tenth of a core for it.

What can be written between two measurements is bounded by the disk's write speed times the poll
interval; ``sandbox.min_free_disk_gib`` still stops the run before the disk fills.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time

import docker.errors

from aes.sandbox.docker_client import ENGINE_ERRORS

log = logging.getLogger(__name__)

WALK_SHARE = 10
"""A layer walk of T seconds is repeated after at least ``WALK_SHARE * T`` seconds."""


def blocks_used(top: str) -> int:
    """Bytes of disk the files below ``top`` occupy (``st_blocks``, each inode once; links not
    followed; entries that vanish during the walk are skipped)."""
    total, seen = 0, set()
    stack = [top]
    while stack:
        try:
            listing = os.scandir(stack.pop())
        except OSError:
            continue
        with listing:
            for entry in listing:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
                    key = (info.st_dev, info.st_ino)
                    if key in seen:
                        continue
                    seen.add(key)
                total += info.st_blocks * 512
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
    return total


class StorageWatch:
    """Kills watched containers whose writable layer outgrows their limit."""

    def __init__(self, client, poll_sec: float, measure_blocks: bool = True):
        self.client = client
        self.poll_sec = poll_sec
        self.measure_blocks = measure_blocks
        """Measure disk blocks where the layer can be read from this host (else the engine's apparent size)."""
        self._limits: dict[str, int] = {}
        self._layers: dict[str, str | None] = {}
        self._due: dict[str, float] = {}
        self._exceeded: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="aes-storage-watch", daemon=True)
        self._thread.start()

    def watch(self, container, limit_mb: int) -> None:
        layer = self._layer(container.id)
        with self._lock:
            self._limits[container.id] = limit_mb << 20
            self._layers[container.id] = layer
        self._wake.set()

    def forget(self, container) -> None:
        with self._lock:
            for table in (self._limits, self._layers, self._due, self._exceeded):
                table.pop(container.id, None)

    def exceeded(self, container) -> tuple[int, int] | None:
        """(bytes written, limit) if ``container`` was killed for its storage, else None."""
        with self._lock:
            return self._exceeded.get(container.id)

    def _layer(self, cid: str) -> str | None:
        """The container's writable layer as a directory on this host, when it is one."""
        try:
            data = (self.client.api.inspect_container(cid).get("GraphDriver") or {}).get("Data") or {}
        except (docker.errors.APIError, *ENGINE_ERRORS):
            return None
        upper = data.get("UpperDir")
        return upper if upper and os.path.isdir(upper) else None

    def check(self) -> None:
        """Measure every watched container once (the loop's body; tests call it directly)."""
        now = time.monotonic()
        with self._lock:
            ids = [cid for cid in self._limits if cid not in self._exceeded]
            walk = [cid for cid in ids if self.measure_blocks and self._layers.get(cid)
                    and self._due.get(cid, 0.0) <= now]
            apparent = [cid for cid in ids if not (self.measure_blocks and self._layers.get(cid))]
        sizes: dict[str, int] = {}
        for cid in walk:
            with self._lock:
                layer = self._layers.get(cid)
            if layer is None:
                continue
            if not os.path.isdir(layer):  # the container is gone
                with self._lock:
                    self._limits.pop(cid, None)
                continue
            began = time.monotonic()
            sizes[cid] = blocks_used(layer)
            spent = time.monotonic() - began
            with self._lock:
                self._due[cid] = began + max(self.poll_sec, WALK_SHARE * spent)
        if apparent:
            try:
                rows = self.client.api.containers(all=True, size=True, filters={"id": apparent})
            except (docker.errors.APIError, *ENGINE_ERRORS):
                rows = None
            if rows is not None:
                present = {row["Id"] for row in rows}
                sizes.update({row["Id"]: int(row.get("SizeRw") or 0) for row in rows})
                with self._lock:
                    for cid in apparent:
                        if cid not in present:
                            self._limits.pop(cid, None)
        for cid, size in sizes.items():
            with self._lock:
                limit = self._limits.get(cid)
            if limit is None or size <= limit:
                continue
            with self._lock:
                self._exceeded[cid] = (size, limit)
            log.warning("container %s wrote %d MiB, over its %d MiB storage limit: killed",
                        cid[:12], size >> 20, limit >> 20)
            try:
                self.client.api.kill(cid)
            except (docker.errors.APIError, *ENGINE_ERRORS):
                pass

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
