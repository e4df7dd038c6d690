"""One running trial container: exec with a deadline and capped output, file transfer, teardown."""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import select
import signal
import struct
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import docker.errors

from aes.sandbox.docker_client import ENGINE_ERRORS, proc_stat

log = logging.getLogger(__name__)

_POLL_START, _POLL_MAX = 0.02, 0.5


@dataclass
class ExecResult:
    """The result of one command in the container."""

    exit_code: int | None
    """Exit status; None when the command timed out or its status is unknown."""
    output: str
    """stdout and stderr interleaved as the command wrote them, head and tail kept."""
    timed_out: bool = False
    truncated_bytes: int = 0
    """Bytes of output dropped from the middle to respect the output limit."""
    seconds: float = 0.0

    def combine(self, other: "ExecResult") -> "ExecResult":
        """Two commands as one: the first failure's status, both outputs."""
        code = self.exit_code if self.exit_code != 0 else other.exit_code
        return ExecResult(code, self.output + other.output, self.timed_out or other.timed_out,
                          self.truncated_bytes + other.truncated_bytes, self.seconds + other.seconds)


class CappedOutput:
    """Keeps the first and last ``limit / 2`` bytes of a stream of any length."""

    def __init__(self, limit: int):
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def write(self, data: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail += data
        excess = len(self.tail) - self.half
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        middle = f"\n[... {self.dropped} bytes of output omitted ...]\n".encode() if self.dropped else b""
        return (bytes(self.head) + middle + bytes(self.tail)).decode("utf-8", errors="replace")


class _Frames:
    """Incremental parser of Docker's multiplexed stdout/stderr stream."""

    def __init__(self, sink: CappedOutput):
        self.sink = sink
        self.buf = bytearray()
        self.need = 0  # payload bytes still owed to the current frame

    def feed(self, data: bytes) -> None:
        self.buf += data
        while self.buf:
            if self.need:
                chunk = bytes(self.buf[: self.need])
                del self.buf[: len(chunk)]
                self.need -= len(chunk)
                self.sink.write(chunk)
                continue
            if len(self.buf) < 8:
                return
            self.need = struct.unpack(">I", bytes(self.buf[4:8]))[0]
            del self.buf[:8]


def tar_directory(local_dir: Path, arc_root: str, executable: tuple[str, ...] = (),
                  extra_dirs: tuple[str, ...] = ()) -> tempfile.SpooledTemporaryFile:
    """A tar of ``local_dir`` whose entries live under ``arc_root`` (no leading slash), spooled to
    disk past 8 MiB and read file by file, so a large directory never sits in memory whole.
    Entries are root-owned; top-level files named in ``executable`` get mode 0755; ``extra_dirs``
    (relative to /) are added first as empty directories anyone may write to."""
    buf = tempfile.SpooledTemporaryFile(max_size=8 << 20)

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        if info.isfile() and info.name in {f"{arc_root}/{name}" for name in executable}:
            info.mode |= 0o755
        return info

    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in extra_dirs:
            info = tarfile.TarInfo(name.strip("/"))
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o777, int(time.time())
            tar.addfile(info)
        tar.add(str(local_dir), arcname=arc_root, filter=owned)
    buf.seek(0)
    return buf


def tar_entries(entries: dict[str, bytes | None]) -> bytes:
    """A tar holding the given files (bytes) and directories (None), root-owned."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name.strip("/"))
            info.mtime = int(time.time())
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o777
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o755
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class Container:
    """A started container owned by this process; ``remove`` is idempotent and fast."""

    def __init__(self, client, container, output_limit: int, workdir: str | None = None,
                 env: dict[str, str] | None = None):
        self.client = client
        self.api = client.api
        self.container = container
        self.id = container.id
        self.output_limit = output_limit
        self.workdir = workdir
        self.env = dict(env or {})
        self._removed = False

    # -- commands ----------------------------------------------------------------------
    def exec(self, command: str | list[str], timeout: float, *, workdir: str | None = None,
             env: dict[str, str] | None = None, user: str | None = None) -> ExecResult:
        """Run ``command`` (a string runs under ``bash -c``) for at most ``timeout`` seconds."""
        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        start = time.monotonic()
        deadline = start + max(timeout, 0.0)
        out = CappedOutput(self.output_limit)
        try:
            exec_id = self.api.exec_create(
                self.id, argv, stdout=True, stderr=True, stdin=False, tty=False,
                environment={**self.env, **(env or {})} or None,
                workdir=workdir or self.workdir, user=user or "",
            )["Id"]
            sock = self.api.exec_start(exec_id, socket=True)
        except docker.errors.APIError as exc:
            return ExecResult(None, f"exec failed: {exc.explanation or exc}", seconds=time.monotonic() - start)
        raw = getattr(sock, "_sock", sock)
        frames = _Frames(out)
        timed_out = False
        try:
            timed_out = self._pump(raw, frames, exec_id, deadline)
        finally:
            try:
                sock.close()
            except OSError:
                pass
        exit_code = None
        if not timed_out:
            exit_code, timed_out = self._exit_code(exec_id, deadline)
        if timed_out:
            self._kill_exec(exec_id)
        return ExecResult(exit_code, out.text(), timed_out, out.dropped, time.monotonic() - start)

    def _pump(self, raw, frames: _Frames, exec_id: str, deadline: float) -> bool:
        """Read output until EOF or the process ends; True if the deadline passed first."""
        poll = _POLL_START
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            ready, _, _ = select.select([raw], [], [], min(remaining, poll))
            if ready:
                try:
                    data = raw.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    return False
                if not data:
                    return False
                frames.feed(data)
                poll = _POLL_START
                continue
            # Silence: a background process may hold the stream open after the command ended.
            if not self._exec_running(exec_id):
                ready, _, _ = select.select([raw], [], [], 0.05)
                if ready:
                    continue
                return False
            poll = min(poll * 2, _POLL_MAX)

    def _exec_running(self, exec_id: str) -> bool:
        try:
            return bool(self.api.exec_inspect(exec_id)["Running"])
        except docker.errors.APIError:
            return False

    def _exit_code(self, exec_id: str, deadline: float) -> tuple[int | None, bool]:
        """(exit status, timed out) once the engine has seen the process end. Its output stream can
        close first (or break on a loaded host) while the process still runs: it is waited for up to
        the command's deadline (at least a few seconds, for the engine to notice an exit)."""
        deadline, pause = max(deadline, time.monotonic() + 5.0), 0.01
        while True:
            try:
                info = self.api.exec_inspect(exec_id)
            except docker.errors.APIError:
                return None, False
            if not info["Running"]:
                return info["ExitCode"], False
            if time.monotonic() >= deadline:
                return None, True
            time.sleep(pause)
            pause = min(pause * 2, 0.25)

    def _kill_exec(self, exec_id: str) -> None:
        """Kill a timed-out command and its descendants (host side, this container only)."""
        try:
            pid = int(self.api.exec_inspect(exec_id).get("Pid") or 0)
        except docker.errors.APIError:
            return
        if pid <= 0 or not _in_container(pid, self.id):
            return
        for victim in [pid, *_descendants(pid)]:
            try:
                os.kill(victim, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    # -- files -------------------------------------------------------------------------
    def put_archive(self, tar_bytes, dest: str = "/") -> None:
        """Extract a tar (bytes or a file object, streamed) into the container at ``dest``."""
        self.api.put_archive(self.id, dest, tar_bytes)

    def upload_dir(self, local_dir: Path, dest: str, executable: tuple[str, ...] = (),
                   extra_dirs: tuple[str, ...] = ()) -> None:
        """Copy the contents of ``local_dir`` to the absolute path ``dest`` (streamed)."""
        target = PurePosixPath(dest)
        with tar_directory(local_dir, str(target.relative_to("/")), executable, extra_dirs) as archive:
            self.put_archive(archive, "/")

    def stat(self, path: str) -> dict | None:
        """The engine's stat of ``path`` (name, size, mode, linkTarget); None if absent."""
        response = self.api.head(self.api._url("/containers/{0}/archive", self.id), params={"path": path})
        if response.status_code != 200:
            return None
        header = response.headers.get("X-Docker-Container-Path-Stat")
        return json.loads(base64.b64decode(header)) if header else None

    def exists(self, path: str) -> bool:
        return self.stat(path) is not None

    def read_file(self, path: str, limit: int = 1 << 20) -> bytes | None:
        """A regular file's bytes (at most ``limit``); None if absent or not a regular file. A file
        that changes while it is read (a process still writing it) raises ValueError."""
        try:
            stream, stat = self.api.get_archive(self.id, path)
        except docker.errors.NotFound:
            return None
        if stat.get("size", 0) > limit or stat.get("mode", 0) & (1 << 27):  # Go's os.ModeSymlink
            return None  # a link: Docker sends the link itself (no regular file), Podman its target
        data = b"".join(stream)
        try:
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                member = tar.next()
                if member is None or not member.isfile():
                    return None
                handle = tar.extractfile(member)
                return handle.read(limit) if handle else None
        except tarfile.TarError as exc:  # the engine archived a file that shrank as it was read
            raise ValueError(f"{path} changed while it was read ({exc})") from None

    def download(self, path: str, dest: Path, limit: int = 64 << 20) -> bool:
        """Copy a file or directory out to ``dest`` (a directory); False if absent or too large.

        Members with absolute paths, ``..`` or links that leave ``dest`` are skipped.
        """
        try:
            stream, stat = self.api.get_archive(self.id, path)
        except docker.errors.NotFound:
            return False
        buf = io.BytesIO()
        for chunk in stream:
            buf.write(chunk)
            if buf.tell() > limit:
                return False
        buf.seek(0)
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=buf) as tar:
            tar.extractall(dest, filter=_safe_member)
        return True

    # -- state -------------------------------------------------------------------------
    def status(self) -> tuple[str, int | None, bool]:
        """(docker state, exit code if exited, OOM-killed)."""
        try:
            state = self.api.inspect_container(self.id)["State"]
        except docker.errors.NotFound:
            return "removed", None, False
        return state["Status"], state.get("ExitCode"), bool(state.get("OOMKilled"))

    def pause(self, retries: int = 4) -> bool:
        """Stop every process of the container for good; its files stay readable. Freezes it
        (cgroup freezer) and says True; the freezer can fail while processes sit in the kernel
        ("unable to freeze": heavy I/O, many forks), so it is tried again, and if it still fails the
        container is killed instead: False (its writable layer is then read through the engine's
        API, not the unmounted merged view). A container that is not running: False."""
        for attempt in range(retries + 1):
            try:
                self.api.pause(self.id)
                return True
            except docker.errors.APIError as exc:
                text = str(exc)
                if "already paused" in text:
                    return True
                if "is not running" in text:
                    return False
                # Podman reports runc's failure without its message ("`/usr/bin/runc pause ID` failed")
                if "unable to freeze" not in text and not ("pause" in text and "failed: exit status" in text):
                    raise
                if attempt < retries:
                    time.sleep(0.25 * 2 ** attempt)
        log.warning("container %s could not be frozen after %d tries; killing it to end the agent's turn",
                    self.id[:12], retries + 1)
        try:
            self.api.kill(self.id)
        except docker.errors.APIError as exc:
            if "is not running" not in str(exc) and "can only kill running containers" not in str(exc):
                raise
        return False

    def logs(self, limit: int = 4096) -> str:
        try:
            return self.container.logs(tail=50)[-limit:].decode("utf-8", errors="replace")
        except docker.errors.APIError:
            return ""

    def remove(self) -> None:
        """Kill and remove at once (SIGKILL: no wait for processes that ignore SIGTERM)."""
        if self._removed:
            return
        try:
            self.api.remove_container(self.id, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                log.warning("could not remove container %s: %s", self.id[:12], exc)
                return
        except ENGINE_ERRORS:
            return  # the engine went away; DockerSandbox.recover removes it once it is back
        self._removed = True

    def __enter__(self) -> "Container":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _safe_member(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """tarfile's ``data`` filter, skipping (not failing on) members that would escape; only plain
    files and directories come out (no links, devices or pipes of a container the agent shaped)."""
    if not (member.isfile() or member.isdir()):
        log.debug("skipped archive member %r (not a plain file or directory)", member.name)
        return None
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        log.warning("skipped unsafe archive member %r", member.name)
        return None


def _in_container(pid: int, container_id: str) -> bool:
    try:
        with open(f"/proc/{pid}/cgroup") as fh:
            return container_id in fh.read()
    except OSError:
        return False


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = proc_stat(entry)
        if not fields or len(fields) < 2:
            continue
        ppid = int(fields[1])
        children.setdefault(ppid, []).append(int(entry))
    out, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out
