"""Docker Engine connection, the labels aes puts on what it creates, and the reaper."""

from __future__ import annotations

import functools
import logging
import os
import socket
from typing import TYPE_CHECKING

import requests.exceptions
import urllib3.exceptions

from aes.config import SandboxConfig

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

LABEL_MANAGED = "aes.managed"
LABEL_HOST = "aes.host"
LABEL_PID = "aes.pid"
LABEL_PID_START = "aes.pid_start"
LABEL_ROLE = "aes.role"
LABEL_TASK = "aes.task"
# Images carry their own keys: containers inherit image labels, and an image's builder
# process must never be mistaken for the owner of a container started from it.
LABEL_IMAGE = "aes.image"
LABEL_IMAGE_TASK = "aes.image.task"


ENGINE_ERRORS = (requests.exceptions.ConnectionError, urllib3.exceptions.ProtocolError, ConnectionError)
"""What a call to an engine that went away raises (as opposed to the engine's own refusals)."""


class SandboxUnavailable(RuntimeError):
    """The Docker engine cannot be reached; the message says how to start it."""


def proc_stat(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first), None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _process_start(pid: int) -> str | None:
    """Start time of a process (clock ticks since boot), None if it does not exist."""
    fields = proc_stat(pid)
    return fields[19] if fields and len(fields) > 19 else None


def image_labels(kind: str, task: str | None = None) -> dict[str, str]:
    """Labels of an image aes builds (``kind``: base or task)."""
    labels = {LABEL_IMAGE: kind}
    if task:
        labels[LABEL_IMAGE_TASK] = task[:200]
    return labels


EXTRA_LABELS: dict[str, str] = {}
"""Labels this process adds to every container it starts (a Ray worker: its node and job,
:mod:`aes.sandbox.ray_executor`)."""


def owner_labels(role: str, task: str | None = None) -> dict[str, str]:
    """Labels naming this process as the owner of a container or image."""
    pid = os.getpid()
    labels = {
        **EXTRA_LABELS,
        LABEL_MANAGED: "true",
        LABEL_HOST: socket.gethostname(),
        LABEL_PID: str(pid),
        LABEL_PID_START: _process_start(pid) or "",
        LABEL_ROLE: role,
    }
    if task:
        labels[LABEL_TASK] = task[:200]
    return labels


@functools.lru_cache(maxsize=8)
def _connect(docker_host: str | None) -> "docker.DockerClient":
    import docker

    try:
        if docker_host:
            client = docker.DockerClient(base_url=docker_host, max_pool_size=64)
        else:
            client = docker.from_env(max_pool_size=64)
        if client.api.base_url.startswith("http+docker://"):
            # A local socket takes no proxy: without this, requests reads the proxy variables
            # of os.environ on every call, which races with threads that change os.environ.
            client.api.trust_env = False
        client.ping()
    except docker.errors.DockerException as exc:
        raise SandboxUnavailable(
            f"cannot reach the Docker engine ({exc}). Start it (e.g. `dockerd &` after "
            "`apt-get install -y docker.io`, or run launchers/setup.sh) or set "
            "sandbox.docker_host / DOCKER_HOST."
        ) from None
    return client


def connect(cfg: SandboxConfig) -> "docker.DockerClient":
    """A shared, thread-safe client for the configured engine."""
    return _connect(cfg.docker_host)


def _owner_alive(labels: dict[str, str]) -> bool:
    if labels.get(LABEL_HOST) != socket.gethostname():
        return True  # another machine's container on a shared engine: not ours to judge
    try:
        pid = int(labels.get(LABEL_PID, ""))
    except ValueError:
        return False
    start = _process_start(pid)
    return start is not None and start == labels.get(LABEL_PID_START)


def reap_orphans(cfg: SandboxConfig) -> int:
    """Remove aes containers whose owning process on this host is gone; returns the count."""
    import docker.errors

    api = connect(cfg).api
    removed = 0
    # The low-level listing carries the labels, so no per-container lookup can race with
    # another process removing that container.
    for info in api.containers(all=True, filters={"label": f"{LABEL_MANAGED}=true"}):
        if _owner_alive(info.get("Labels") or {}):
            continue
        try:
            api.remove_container(info["Id"], force=True, v=True)
            removed += 1
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                log.warning("could not remove leftover container %s: %s", info["Id"][:12], exc)
    if removed:
        log.warning("removed %d container(s) left behind by a crashed aes run", removed)
    return removed
