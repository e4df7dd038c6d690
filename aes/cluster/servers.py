"""Rollout servers on an allocation: start, wait for health, restart with new weights, stop.

Every server runs under :mod:`aes.cluster.guard` as the leader of its own process group: stopping
it is SIGTERM to the group, SIGKILL after ``cluster.stop_timeout_sec``, and a job that dies without
its teardown takes its servers with it. Output goes to one log file per server
(``RUN_DIR/servers/server-<i>.log`` unless ``cluster.log_dir``), appended across restarts, each
start under a header line; every error names the server's URL and log and quotes its last lines.

The servers of the process's own node are a :class:`ServerGroup`; :func:`active_group` is the one
this process started (the llama.cpp weight sync restarts it).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path

from aes.errors import InfrastructureError

log = logging.getLogger("aes.cluster")

POLL_SEC = 1.0
TAIL_LINES = 20


class ServerError(InfrastructureError):
    """A rollout server did not start, did not become healthy, or died; the message names its URL and log."""


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Servers are on the cluster's own network: never through an HTTP proxy."""


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with _NO_PROXY.open(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read() or b""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_taken(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            text = fh.read().decode(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


@dataclass
class ServerSpec:
    """One server: what runs, where it listens, how clients reach it, where it logs."""

    index: int
    backend: str
    model: str
    """What the server loads (a restart with new weights changes it)."""
    command: list[str]
    env: dict[str, str]
    bind_host: str
    port: int
    client_host: str
    """The address clients use (127.0.0.1 on the same node, else the node's host name)."""
    log: Path
    gpus: tuple[str, ...] = ()
    remote: bool = False
    """Started by another node's job process: this process only checks its health."""
    health_path: str = "/health"

    @property
    def name(self) -> str:
        return f"server {self.index}"

    @property
    def url(self) -> str:
        return f"http://{self.client_host}:{self.port}"

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    @property
    def health_url(self) -> str:
        return self.url + self.health_path

    def describe(self) -> str:
        where = f"GPUs {','.join(self.gpus)}" if self.gpus else "CPU"
        return f"{self.name} ({self.backend}, {where}, {self.url}; log {self.log})"


@dataclass
class ServerProcess:
    """A server this process starts and stops (through the guard)."""

    spec: ServerSpec
    stop_timeout: float = 30.0
    proc: subprocess.Popen | None = field(default=None, repr=False)
    starts: int = 0

    def start(self) -> None:
        spec = self.spec
        if port_taken(spec.bind_host, spec.port):
            raise ServerError(f"{spec.name} cannot listen on {spec.bind_host}:{spec.port}: the port is taken "
                              f"(another server or job on this node?); set cluster.port, or null for free ports")
        spec.log.parent.mkdir(parents=True, exist_ok=True)
        with open(spec.log, "ab") as out:
            out.write(f"=== aes: start {self.starts + 1} of {spec.name} at {time.strftime('%Y-%m-%d %H:%M:%S')}: "
                      f"{shlex.join(spec.command)}\n".encode())
            out.flush()
            env = {**os.environ, **spec.env}
            self.proc = subprocess.Popen([sys.executable, "-m", "aes.cluster.guard", str(os.getpid()), "--",
                                          *spec.command], stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self.starts += 1
        log.info("started %s: %s", spec.describe(), shlex.join(spec.command))

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise ServerError(f"{self.spec.describe()} exited with status {self.proc.returncode}; "
                              f"last lines of its log:\n{tail(self.spec.log)}")

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after ``stop_timeout`` seconds."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s ignored SIGTERM for %.0f s: killing it", self.spec.name, self.stop_timeout)
        _signal_group(proc.pid, signal.SIGKILL)  # whatever of the group is left (workers of the server)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        log.info("stopped %s", self.spec.name)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wait_healthy(servers: list[ServerSpec], processes: dict[int, ServerProcess], timeout: float) -> None:
    """Until every server answers its health check with 200; a server of ours that exits, or any that
    does not answer within ``timeout`` seconds, is a :class:`ServerError` naming its URL and log."""
    deadline = time.monotonic() + timeout
    waiting = list(servers)
    last: dict[int, str] = {}
    while waiting:
        for spec in list(waiting):
            proc = processes.get(spec.index)
            if proc is not None and proc.proc is not None and proc.proc.poll() is not None:
                raise ServerError(f"{spec.describe()} exited with status {proc.proc.returncode} before it answered "
                                  f"{spec.health_url}; last lines of its log:\n{tail(spec.log)}")
            try:
                status, _ = http_get(spec.health_url, timeout=5.0)
                last[spec.index] = f"answered {status}"
            except OSError as exc:
                status, last[spec.index] = 0, f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            if status == 200:
                waiting.remove(spec)
                log.info("%s is healthy", spec.describe())
        if not waiting:
            return
        if time.monotonic() > deadline:
            spec = waiting[0]
            raise ServerError(f"{spec.describe()} did not answer {spec.health_url} within {timeout:.0f} s "
                              f"(cluster.health_timeout_sec; last: {last.get(spec.index, 'no answer')}); "
                              f"last lines of its log:\n{tail(spec.log)}")
        time.sleep(POLL_SEC)


class ServerGroup:
    """The servers of this node (started here) and of other nodes (only health-checked here)."""

    def __init__(self, specs: list[ServerSpec], stop_timeout: float = 30.0, health_timeout: float = 1800.0):
        self.specs = specs
        self.health_timeout = health_timeout
        self.processes = {s.index: ServerProcess(s, stop_timeout) for s in specs if not s.remote}
        self._lock = threading.Lock()

    @property
    def base_urls(self) -> list[str]:
        return [s.base_url for s in self.specs]

    def start(self) -> None:
        for proc in self.processes.values():
            proc.start()

    def wait_healthy(self, remote: bool = True) -> None:
        wait_healthy([s for s in self.specs if remote or not s.remote], self.processes, self.health_timeout)

    def check_alive(self) -> None:
        for proc in self.processes.values():
            proc.check_alive()

    def stop(self) -> None:
        """Stop every server of this node (all at once, then wait for each)."""
        procs = [p for p in self.processes.values() if p.proc is not None]
        for proc in procs:
            if proc.alive:
                _signal_group(proc.proc.pid, signal.SIGTERM)
        for proc in procs:
            proc.stop()

    def reload(self, model: str | Path) -> None:
        """Restart every server on the same port with ``model`` (llama.cpp: a re-exported GGUF) and
        wait until each is healthy and reports that file. No call may be in flight (the client's gate)."""
        model = str(model)
        with self._lock:
            remote = [s for s in self.specs if s.remote]
            if remote:
                raise ServerError(f"{remote[0].describe()} runs on another node: only servers of this node can be "
                                  "restarted with new weights")
            for proc in self.processes.values():
                proc.stop()
                old = proc.spec.model
                proc.spec = replace(proc.spec, model=model,
                                    command=[arg.replace(old, model) for arg in proc.spec.command])
                proc.start()
            wait_healthy([p.spec for p in self.processes.values()], self.processes, self.health_timeout)
            self.specs = [self.processes[s.index].spec for s in self.specs]
            for proc in self.processes.values():
                served = served_model_path(proc.spec)
                if served is not None and Path(served).resolve() != Path(model).resolve():
                    raise ServerError(f"{proc.spec.describe()} was restarted with {model} but serves {served}")


def served_model_path(spec: ServerSpec) -> str | None:
    """The model file a llama.cpp server reports in ``/props`` (None if it does not say)."""
    try:
        status, body = http_get(spec.url + "/props", timeout=10.0)
    except OSError:
        return None
    if status != 200:
        return None
    try:
        return json.loads(body).get("model_path")
    except ValueError:
        return None


_ACTIVE: ServerGroup | None = None


def activate(group: ServerGroup | None) -> None:
    """This process's servers (None: none); the trainer's weight sync is told too (llama.cpp restarts)."""
    global _ACTIVE
    _ACTIVE = group
    from aes.train.sync import use_servers

    use_servers(group)


def active_group() -> ServerGroup | None:
    """The servers this process started (``cluster.servers``), if any."""
    return _ACTIVE
