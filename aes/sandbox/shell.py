"""A persistent bash session in a container: one process, many commands, state kept.

The terminal agent's commands run in one long-lived ``bash`` (as in a real terminal,
``cd`` and exported variables persist) instead of one ``docker exec`` each, which takes
the per-command cost from a process start (~50 ms here) to a socket round trip. Each
command's stdin is ``/dev/null``, stderr is merged into stdout, and a random marker
printed after it carries its exit status. What background jobs print between commands
is discarded, so it never shows up as a later command's output. A command that outlives its deadline is killed
(host side, its process tree only) and the session goes on; if bash itself exits, the
next command starts a new session.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import time
import uuid

import docker.errors
import requests.exceptions

from aes.sandbox.container import (
    CappedOutput,
    Container,
    ExecResult,
    _descendants,
    _Frames,
    _in_container,
)

_KILL_GRACE = 2.0


class _Discard:
    """Where output between commands (of background jobs) goes."""

    def write(self, data: bytes) -> None:
        pass


class _Router:
    """The session's one frame parser writes here; the current command's sink receives it."""

    def __init__(self):
        self.sink = _Discard()

    def write(self, data: bytes) -> None:
        self.sink.write(data)


class _Sink:
    """Forwards stdout bytes to the capped output while watching the tail for the marker."""

    def __init__(self, out: CappedOutput, marker: bytes):
        self.out = out
        self.marker = marker
        self.tail = b""
        self.status: int | None = None
        self.pending = b""  # bytes held back because they may be the start of the marker

    def write(self, data: bytes) -> None:
        if self.status is not None:
            return  # output of background jobs after the marker belongs to no command
        data = self.pending + data
        match = re.search(re.escape(b"\n" + self.marker) + rb" (-?\d+)\n", data)
        if match:
            self.out.write(data[: match.start()])
            self.status = int(match.group(1))
            return
        keep = len(self.marker) + 16
        self.out.write(data[:-keep] if len(data) > keep else b"")
        self.pending = data[-keep:] if len(data) > keep else data


def syntax_problem(command: str) -> str | None:
    """bash's complaint about ``command`` (unbalanced quotes, open here-documents...), if any."""
    check = subprocess.run(["bash", "-n"], input=command + "\n", capture_output=True, text=True, timeout=10)
    if check.returncode != 0 or "here-document" in check.stderr:
        return check.stderr.strip() or "bash: syntax error"
    return None


class ShellSession:
    """A bash process in ``container`` that runs commands one after another."""

    def __init__(self, container: Container, workdir: str | None = None, env: dict[str, str] | None = None,
                 user: str | None = None):
        self.container = container
        self.api = container.api
        self.workdir, self.env, self.user = workdir, env, user
        self.exec_id: str | None = None
        self.sock = None
        self.raw = None
        self.router = _Router()
        self.frames = _Frames(self.router)  # type: ignore[arg-type]

    def _open(self) -> None:
        self.exec_id = self.api.exec_create(
            self.container.id, ["bash", "--noprofile", "--norc"], stdin=True, stdout=True, stderr=True,
            tty=False, environment={**self.container.env, **(self.env or {})} or None,
            workdir=self.workdir or self.container.workdir, user=self.user or "")["Id"]
        self.sock = self.api.exec_start(self.exec_id, socket=True)
        self.raw = getattr(self.sock, "_sock", self.sock)
        self.router.sink = _Discard()
        self.frames = _Frames(self.router)  # type: ignore[arg-type]

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = self.raw = self.exec_id = None

    def run(self, command: str, timeout: float) -> ExecResult:
        """Run ``command``; output and exit status as :meth:`Container.exec` gives them."""
        start = time.monotonic()
        problem = syntax_problem(command)
        if problem:  # in the session it would end bash or swallow the lines that follow
            return ExecResult(2, problem, seconds=time.monotonic() - start)
        try:
            if self.raw is None:
                self._open()
            else:
                self._drain()
            marker = f"__aes_done_{uuid.uuid4().hex}__".encode()
            # `:` first: a group of comments only would be a syntax error, which ends a non-interactive bash
            script = f"{{ :\n{command}\n}} < /dev/null 2>&1\nprintf '\\n%s %d\\n' {marker.decode()} $?\n"
            self.raw.sendall(script.encode())
        except requests.exceptions.ConnectionError:
            self.close()
            raise  # the engine is gone, not the shell: the trial runs again once it is back
        except (docker.errors.APIError, OSError) as exc:
            self.close()
            return ExecResult(None, f"could not start a shell: {exc}", seconds=time.monotonic() - start)
        out = CappedOutput(self.container.output_limit)
        sink = self.router.sink = _Sink(out, marker)
        end = self._pump(sink, start + max(timeout, 0.0))
        self.router.sink = _Discard()
        if end == "timeout":
            self._kill_children()
            self.router.sink = sink
            late = self._pump(sink, time.monotonic() + _KILL_GRACE)
            self.router.sink = _Discard()
            if late != "done":
                self.close()  # the shell itself is stuck: start a new one next time
        elif end == "eof":
            self.close()  # bash exited (e.g. the command ran `exit`)
            out.write(b"\n[the shell exited; a new one starts with the next command]")
        timed_out = end == "timeout"
        code = None if timed_out else sink.status
        return ExecResult(code, out.text(), timed_out, out.dropped, time.monotonic() - start)

    def _drain(self) -> None:
        """Discard what background jobs printed since the last command (keeps the framing intact)."""
        while select.select([self.raw], [], [], 0)[0]:
            data = self.raw.recv(65536)
            if not data:
                self.close()
                self._open()
                return
            self.frames.feed(data)

    def _pump(self, sink: _Sink, deadline: float) -> str:
        """Read until the marker arrives ("done"), the deadline passes ("timeout") or bash exits ("eof")."""
        while sink.status is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            ready, _, _ = select.select([self.raw], [], [], min(remaining, 1.0))
            if not ready:
                continue
            try:
                data = self.raw.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                return "eof"
            if not data:
                return "eof"
            self.frames.feed(data)
        return "done"

    def _kill_children(self) -> None:
        """SIGKILL everything the shell started (host side), leaving the shell itself alive."""
        try:
            pid = int(self.api.exec_inspect(self.exec_id).get("Pid") or 0)
        except docker.errors.APIError:
            return
        if pid <= 0 or not _in_container(pid, self.container.id):
            return
        for child in _descendants(pid):
            try:
                os.kill(child, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
