"""Call the agent's code from a test without running it in the process that decides the reward.

A test that imports the code under test runs that code inside pytest: from there it can rewrite
the report (pytest's hooks, the junit file, an atexit handler, ``os._exit(0)``), read the
expected values from the test file, or, as root, edit the tests and the reward script before
they run. So tests of agent-written code (a repository's fix, a kernel, a module) keep the
agent's code in a child process and exchange plain values with it only. The rule, by mechanism:

* **as whom**: the child runs as uid/gid 64999 (a user of its own: no groups, a fresh HOME and
  working directory, a cleared environment, ``python3 -I``) with ``no_new_privs`` set before any
  of the agent's code runs, so no set-user-ID program or file capability gives it more;
* **reading what**: before a child starts, the test's own directory (``/tests``: the expected
  values) is made readable by root only and ``/logs/verifier`` unwritable by others; the
  command-line gate (:func:`main`) does the same before it runs a repository's suite;
* **for how long**: every process of uid 64999 is ended before a child starts and when it is
  closed - found by its user in ``/proc``, not by its process group or session, so one that
  called ``setsid`` or forked twice ends too (without a PID namespace or a cgroup of its own,
  which a container's default capabilities do not allow, the dedicated user is the handle);
* **leaving what**: then every file, directory, FIFO or socket owned by that user or its group,
  anywhere it can reach on the container's file systems (``/tmp``, ``/var/tmp``, ``/dev/shm``, any
  folder it could write; not inside folders it cannot enter), and its System V IPC objects are
  removed, and files or non-sticky folders writable by others lose that bit: a child sees a
  ``/tmp`` of its own, with nothing an earlier child (the gate's run of the public suite included)
  left there. Only the processes of this PID namespace are ended: run on a host, the kit never
  touches a container's processes, nor the files under an engine's data root (not enterable);
* **saying what**: a request is ``repr((target, args, kwargs))``; ``target`` names a callable by
  module and attribute path (``"telemetry.window_index"``, ``"pkg.Class.method"`` for static
  ones); the reply is ``repr(("ok", value))`` or ``repr(("raise", [class names of the exception's
  MRO], message))``. Both sides read them with :func:`ast.literal_eval` - never ``pickle``, never
  ``eval`` - so a reply is data: ints, floats, strings, bytes, tuples, lists, dicts, sets, None,
  bools, and tensors as ``{"__tensor__": (dtype, shape, raw bytes)}`` (rebuilt in the test's
  process only when it has imported torch);
* **exceptions are data**: an exception of the agent's code is never raised again in the test's
  process as its own class (a ``StopIteration`` would end the test's loop early, an
  ``AttributeError`` would make ``hasattr`` false): a call that raised raises
  :class:`ChildRaised`, one class whatever the child says, and a test that expects an exception
  asks :func:`raises` (``assert raises(ValueError, pkg.parse, "")``), which reads the claimed
  class names as data;
* the child may run helper modules the test hands over as source text (``helpers``), e.g. a
  harness that builds the agent's model and runs it; they execute with the agent's code and their
  results are the child's word, no more.

The test must run as root (Harbor's and aes's verifier user): only root can start a child as
another user. One child at a time per test process. This file is stdlib only and is copied
verbatim into a task's ``tests/`` (``aes/domains/kit/untrusted.py`` is the original; a test
checks the seeds' copies).
"""

from __future__ import annotations

import ast
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

UID = 64999
PROTECTED = ("/logs/verifier",)
PATH = "/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin"
NPROC = 4096
"""The child user's process (and thread) limit: a fork bomb stops there."""
SKIPPED = ("/proc", "/sys", "/dev")
"""Not swept (kernel views and device nodes) but for :data:`SWEPT_IN_DEV`."""
SWEPT_IN_DEV = ("/dev/shm", "/dev/mqueue")
END_WITHIN = 30.0
"""Seconds to end every process of the child user before giving up (the test fails)."""

_PROLOGUE = r'''
import ctypes, os, resource, sys
if ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
    sys.exit("untrusted.py: the kernel refused no_new_privs")
resource.setrlimit(resource.RLIMIT_NPROC, (%d, %d))
''' % (NPROC, NPROC)
"""Runs first in every child: no set-user-ID gain, a bound on its processes."""

_EXEC = _PROLOGUE + "os.execvp(sys.argv[1], sys.argv[1:])\n"

_SERVER = _PROLOGUE + r'''
import ast, importlib
proto_in = os.fdopen(os.dup(0), "r")
proto_out = os.fdopen(os.dup(1), "w")
devnull = os.open(os.devnull, os.O_RDONLY)
os.dup2(devnull, 0)
os.dup2(2, 1)  # the agent's prints go to stderr, never into the replies
sys.path[:0] = ast.literal_eval(sys.argv[1])

def encode(value):
    if type(value).__module__ == "torch" and type(value).__name__ in ("Tensor", "Parameter"):
        t = value.detach().cpu().contiguous()
        return {"__tensor__": (str(t.dtype).replace("torch.", ""), tuple(t.shape), t.view(-1).view(__import__("torch").uint8).numpy().tobytes() if t.numel() else b"")}
    if isinstance(value, (list, tuple, set, frozenset)):
        return type(value)(encode(v) for v in value) if not isinstance(value, tuple) else tuple(encode(v) for v in value)
    if isinstance(value, dict):
        return {encode(k): encode(v) for k, v in value.items()}
    return value

def decode(value):
    if isinstance(value, dict) and set(value) == {"__tensor__"}:
        import torch
        dtype, shape, raw = value["__tensor__"]
        flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        return flat.view(getattr(torch, dtype)).reshape(shape).clone()
    if isinstance(value, (list, tuple)):
        return type(value)(decode(v) for v in value)
    if isinstance(value, dict):
        return {k: decode(v) for k, v in value.items()}
    return value

def resolve(target):
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as exc:
            if exc.name and ".".join(parts[:cut]).startswith(exc.name):
                continue
            raise
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(f"no module for {target!r}")

for line in proto_in:
    result = None
    try:
        target, args, kwargs = ast.literal_eval(line)
        if target.startswith("="):
            result = resolve(target[1:])
        else:
            result = resolve(target)(*decode(args), **decode(kwargs))
        reply = repr(("ok", encode(result)))
        try:
            ast.literal_eval(reply)
        except Exception:
            reply = repr(("bad", f"{target} returned {type(result).__name__}, not plain data"))
    except BaseException as exc:
        reply = repr(("raise", [c.__name__ for c in type(exc).__mro__], str(exc)[:2000]))
    proto_out.write(reply + "\n")
    proto_out.flush()
'''


class UntrustedError(RuntimeError):
    """The child broke the protocol: it died, timed out, or answered with something not data."""


class ChildRaised(Exception):
    """The code under test raised, by the child's word: ``types`` (the class names of its MRO, as
    the child gives them) and ``message`` are data. Always this class, whatever the child
    claims, so the claim cannot pick which ``except`` of the test runs."""

    def __init__(self, target: str, types: tuple, message: str):
        super().__init__(f"{target} raised {types[0] if types else '?'}: {message}")
        self.target, self.types, self.message = target, types, message


def raises(exception: type, call, *args, **kwargs) -> bool:
    """Whether ``call(*args, **kwargs)`` - a :class:`Remote` (``pkg.parse``) - raised, by the
    child's word, an exception with a class named like ``exception`` in its MRO. False when it
    returned; :class:`UntrustedError` (never caught here) when the child broke the protocol."""
    outcome = call.outcome(*args, **kwargs)
    return outcome[0] == "raise" and exception.__name__ in outcome[1]


def _encode(value):
    if type(value).__module__ == "torch" and type(value).__name__ in ("Tensor", "Parameter"):
        import torch

        t = value.detach().cpu().contiguous()
        raw = t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        return {"__tensor__": (str(t.dtype).replace("torch.", ""), tuple(t.shape), raw)}
    if isinstance(value, tuple):
        return tuple(_encode(v) for v in value)
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


def _decode(value):
    if isinstance(value, dict) and set(value) == {"__tensor__"} and "torch" in sys.modules:
        import torch

        dtype, shape, raw = value["__tensor__"]
        if not hasattr(torch, dtype) or not isinstance(getattr(torch, dtype), torch.dtype):
            raise UntrustedError(f"the code under test returned a tensor of unknown dtype {dtype!r}")
        flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        try:
            return flat.view(getattr(torch, dtype)).reshape(tuple(shape)).clone()
        except Exception as exc:  # sizes that do not match: its answer is not a tensor
            raise UntrustedError(f"the code under test returned a malformed tensor ({type(exc).__name__})") from None
    if isinstance(value, tuple):
        return tuple(_decode(v) for v in value)
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        return {k: _decode(v) for k, v in value.items()}
    return value


# -- the child user's processes, files and IPC objects ----------------------------------------------
_LIVE: set = set()
"""The children of this process that have not been closed (at most one)."""


def _processes(uid: int) -> list[int]:
    """The live (not zombie) processes of this PID namespace (the container's: never another
    container's, seen from a host) with ``uid`` as a real, effective, saved or file-system uid."""
    found = []
    depth = len(_status("self").get("NSpid", "").split())
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _status(name)
        if not fields or fields.get("State", "").strip()[:1] in ("Z", "X"):
            continue  # gone meanwhile, or a zombie
        if len(fields.get("NSpid", "").split()) != depth:
            continue  # a process of a nested PID namespace (a container, seen from its host)
        if str(uid) in fields.get("Uid", "").split():
            found.append(int(name))
    return found


def _status(pid: str) -> dict:
    """``/proc/<pid>/status`` as {field: value} (empty when the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    except (OSError, ValueError):
        return {}


def _kill(pid: int, uid: int) -> None:
    """SIGKILL ``pid`` if it is still a process of ``uid`` (a pidfd pins it: no reused pid is hit)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        return
    try:
        with open(f"/proc/{pid}/status") as f:
            mine = any(line.startswith("Uid:") and str(uid) in line.split()[1:] for line in f)
        if mine:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(fd)


def _end_processes(uid: int) -> None:
    """End every process of ``uid`` (those forking meanwhile too); UntrustedError past :data:`END_WITHIN`."""
    deadline = time.monotonic() + END_WITHIN
    while True:
        pids = _processes(uid)
        if not pids:
            return
        if time.monotonic() > deadline:
            raise UntrustedError(f"could not end the processes of uid {uid} within {END_WITHIN:g} s: {pids[:10]}")
        for pid in pids:
            _kill(pid, uid)
        time.sleep(0.01)


def _remove(path: str, is_dir: bool) -> None:
    try:
        if is_dir:
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass


def _sweep(uid: int) -> None:
    """Remove what ``uid`` owns (or its group does) on the container's file systems, and take
    write access for others off files and non-sticky folders: nothing a child left is there for
    the next one, and no place is left where it could leave something in a file it does not own."""
    stack = ["/"] + [d for d in SWEPT_IN_DEV if os.path.isdir(d)]
    while stack:
        top = stack.pop()
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            if entry.path in SKIPPED:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            if st.st_uid == uid or st.st_gid == uid:
                _remove(entry.path, is_dir)
                continue
            if stat.S_ISLNK(st.st_mode):
                continue
            if st.st_mode & stat.S_IWOTH and not (is_dir and st.st_mode & stat.S_ISVTX):
                try:
                    os.chmod(entry.path, stat.S_IMODE(st.st_mode) & ~stat.S_IWOTH)
                except OSError:
                    pass
            for acl in ("system.posix_acl_access", "system.posix_acl_default"):  # a named user's write
                try:
                    os.removexattr(entry.path, acl, follow_symlinks=False)
                except OSError:
                    pass
            if is_dir and _reachable(st, uid):
                stack.append(entry.path)


def _reachable(st: os.stat_result, uid: int) -> bool:
    """Whether the child user can enter a folder (what it cannot enter, it left nothing in: the
    sweep does not go there, e.g. root's 0700 folders, or a container engine's data seen from a host)."""
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == uid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


_IPC_REMOVER = r"""
import ctypes, sys
libc, mine, others = ctypes.CDLL(None, use_errno=True), int(sys.argv[1]), sys.argv[2] == "others"
for kind, column, remove in (("shm", "shmid", lambda i: libc.shmctl(i, 0, None)),
                             ("msg", "msqid", lambda i: libc.msgctl(i, 0, None)),
                             ("sem", "semid", lambda i: libc.semctl(i, 0, 0))):
    try:
        header, *rows = open(f"/proc/sysvipc/{kind}").read().splitlines()
    except OSError:
        continue
    for row in rows:
        fields = dict(zip(header.split(), row.split()))
        owned = mine in (int(fields["uid"]), int(fields["cuid"]), int(fields["gid"]), int(fields["cgid"]))
        if owned or (others and int(fields["perms"], 8) & 0o002):
            remove(int(fields[column]))  # IPC_RMID
"""
"""Removes the System V shared memory, queues and semaphores its user owns (and, with "others",
those anyone may write): the owner may, root may not without CAP_IPC_OWNER (not in a
container's default capabilities)."""


def _remove_ipc(uid: int) -> None:
    """Remove the System V IPC objects that ``uid`` owns or created, or that others may write: those
    others may write as root (their owner), the user's own as the user itself."""
    for user, mode in ((0, "others"), (uid, "own")):
        subprocess.run([sys.executable, "-I", "-c", _IPC_REMOVER, str(uid), mode], user=user, group=user,
                       extra_groups=[], env={"PATH": PATH}, cwd="/", stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)


def _clean(uid: int) -> None:
    """No process of ``uid`` left, nothing it made left, no place for a message to the next child."""
    _end_processes(uid)
    _sweep(uid)
    _remove_ipc(uid)


def _protect(paths) -> None:
    if os.geteuid() != 0:
        raise UntrustedError("tests that call the agent's code must run as root (the verifier's user in Harbor and aes)")
    for path in paths:
        protected = path in PROTECTED
        if protected:
            os.makedirs(path, exist_ok=True)  # root's, before the child could make it
        if not os.path.isdir(path):
            continue
        try:
            os.chown(path, 0, 0)
            os.chmod(path, 0o755 if protected else 0o700)
        except OSError as exc:  # a mount that refuses (rootless engines): fine while the child still cannot get in
            st = os.stat(path)
            if st.st_uid == UID or st.st_mode & 0o002 or (not protected and st.st_mode & 0o005):
                raise UntrustedError(f"cannot keep the code under test out of {path}: {exc}") from None


def _start(uid: int, private) -> None:
    """Before a child: the private paths closed, a clean slate for ``uid``."""
    if _LIVE:
        raise UntrustedError("one child at a time: close the running Untrusted before starting another")
    _protect(list(private) + list(PROTECTED))
    _clean(uid)


def _home(uid: int) -> str:
    home = tempfile.mkdtemp(prefix="aes-untrusted-")
    os.chown(home, uid, uid)
    return home


def _child_env(home: str, env: dict | None) -> dict:
    return {"PATH": PATH, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}


class Untrusted:
    """A child process, as uid 64999, that imports from ``paths`` and answers calls.

    ``Untrusted(["/app/repo"]).call("telemetry.window_index", -1, 1000)``; ``timeout`` bounds
    each call (seconds; the child is killed and :class:`UntrustedError` raised past it); ``env``
    adds variables to the child's cleared environment; ``helpers`` maps module names to source
    text placed on the child's path before ``paths``; ``private`` are directories made root-only
    before the child starts (default: the calling test's directory).
    """

    def __init__(self, paths, *, timeout: float = 60.0, env: dict | None = None, helpers: dict | None = None,
                 private=None, uid: int = UID, max_reply: int = 1 << 28):
        caller = os.path.dirname(os.path.abspath(sys._getframe(1).f_globals.get("__file__", ".")))
        _start(uid, private if private is not None else [caller])
        self.timeout, self.max_reply, self.uid, self.proc = timeout, max_reply, uid, None
        self.home = _home(uid)
        _LIVE.add(self)
        try:
            for name, source in (helpers or {}).items():
                path = os.path.join(self.home, f"{name}.py")
                with open(path, "w") as f:
                    f.write(source)
                os.chown(path, uid, uid)
            path = [self.home] + [str(p) for p in paths]
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-c", _SERVER, repr(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=None, cwd=self.home, env=_child_env(self.home, env), user=uid, group=uid, extra_groups=[],
                text=False, close_fds=True, start_new_session=True)
        except BaseException:
            self.close()
            raise

    def outcome(self, target: str, *args, **kwargs) -> tuple:
        """``target(*args, **kwargs)`` in the child, as data: ``("ok", value)`` or ``("raise",
        class names, message)``; :class:`UntrustedError` when the child broke the protocol."""
        if self.proc is None or self.proc.poll() is not None:
            raise UntrustedError(f"the child running the code under test has exited ({self.proc and self.proc.returncode})")
        request = repr((target, _encode(args), _encode(kwargs)))
        ast.literal_eval(request)  # only data goes over
        reply = self._exchange(request)
        try:
            kind, *rest = ast.literal_eval(reply)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
            raise UntrustedError(f"the code under test answered {target} with something that is not data ({exc})") from None
        if kind == "ok" and len(rest) == 1:
            return ("ok", _decode(rest[0]))
        if kind == "bad" and len(rest) == 1:
            raise UntrustedError(f"{rest[0]} (numbers, strings, bytes, tuples, lists, dicts, sets, None, tensors): "
                                 "turn it into plain values in a helper that runs in the child")
        if kind == "raise" and len(rest) == 2 and isinstance(rest[0], list):
            return ("raise", tuple(str(name) for name in rest[0]), str(rest[1]))
        raise UntrustedError(f"the code under test broke the protocol answering {target}")

    def call(self, target: str, *args, **kwargs):
        """Call ``target(*args, **kwargs)`` in the child: its return value, or :class:`ChildRaised`
        raised here when it raised (whatever its class: use :func:`raises` to expect one)."""
        result = self.outcome(target, *args, **kwargs)
        if result[0] == "raise":
            raise ChildRaised(target, result[1], result[2])
        return result[1]

    def value(self, target: str):
        """The value of ``target`` (a module attribute such as ``"pkg.__all__"``) in the child, as data."""
        return self.call("=" + target)

    def module(self, name: str) -> "Remote":
        """``name`` as an object whose attribute calls run in the child: ``m.f(1)`` is ``call("name.f", 1)``."""
        return Remote(self, name)

    def _exchange(self, request: str) -> str:
        import selectors

        try:
            self.proc.stdin.write((request + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.close()
            raise UntrustedError(f"the child running the code under test has exited ({self.proc.returncode})") from None
        fd, chunks, size = self.proc.stdout.fileno(), [], 0
        deadline = time.monotonic() + self.timeout
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self.close()
                    raise UntrustedError(f"the code under test did not answer within {self.timeout:g} s")
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    self.close()
                    raise UntrustedError(f"the child running the code under test died ({self.proc.returncode})")
                chunks.append(chunk)
                size += len(chunk)
                if size > self.max_reply:
                    self.close()
                    raise UntrustedError(f"the code under test answered with more than {self.max_reply} bytes")
                if chunk.endswith(b"\n"):
                    return b"".join(chunks).decode("utf-8", "replace")

    def close(self) -> None:
        """End the child and every process of its user, remove what they left (see the module's doc)."""
        if self not in _LIVE:
            return
        try:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
            _clean(self.uid)
            if self.proc is not None:
                self.proc.wait(timeout=END_WITHIN)
            shutil.rmtree(self.home, ignore_errors=True)
        finally:
            _LIVE.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Remote:
    """A module or attribute path in the child (see :meth:`Untrusted.module`): attribute access
    extends the path, a call runs it there (:meth:`Untrusted.call`), :meth:`value` reads it,
    :meth:`outcome` calls it and returns what happened as data."""

    def __init__(self, untrusted: Untrusted, path: str):
        self._untrusted, self._path = untrusted, path

    def __getattr__(self, name: str) -> "Remote":
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Remote(self._untrusted, f"{self._path}.{name}")

    def __call__(self, *args, **kwargs):
        return self._untrusted.call(self._path, *args, **kwargs)

    def value(self, name: str | None = None):
        return self._untrusted.value(f"{self._path}.{name}" if name else self._path)

    def outcome(self, *args, **kwargs) -> tuple:
        return self._untrusted.outcome(self._path, *args, **kwargs)


def readable(root: str) -> None:
    """Let the child read the agent's files under ``root``: others may read every file and enter
    every folder (the tests' process runs as root, and the agent's umask is its own). Links are
    left alone, never followed."""
    if not os.path.isdir(root) or os.path.islink(root):
        return
    for path, dirs, files in os.walk(root):
        os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) | 0o005)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(path, d))]
        for name in files:
            entry = os.path.join(path, name)
            st = os.lstat(entry)
            if stat.S_ISREG(st.st_mode):
                os.chmod(entry, stat.S_IMODE(st.st_mode) | 0o004)


def run_as_untrusted(command, cwd: str, *, timeout: float = 300.0, env: dict | None = None, uid: int = UID,
                     private=()):
    """Run ``command`` (argv) as uid 64999 in ``cwd`` (handed to that user for the run, then back
    to root) with a cleared environment, ``private`` made root-only first; its
    :class:`subprocess.CompletedProcess` (stdout and stderr together, text), or ``returncode``
    None when it ran past ``timeout``. For a repository's own test suite, whose exit status is
    all the caller reads."""
    _start(uid, private)
    marker = object()
    _LIVE.add(marker)
    home = None
    try:
        for root, dirs, files in os.walk(cwd):
            for entry in [root] + [os.path.join(root, n) for n in dirs + files]:
                os.lchown(entry, uid, uid)
        home = _home(uid)
        proc = subprocess.Popen([sys.executable, "-I", "-c", _EXEC, *command], cwd=cwd, env=_child_env(home, env),
                                user=uid, group=uid, extra_groups=[], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        chunks: list = []
        reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: proc.stdout.read(1 << 16), b"")),
                                  daemon=True)
        reader.start()
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        proc.kill()
        _end_processes(uid)  # a process it left holding the output ends here, not at the timeout
        proc.wait(timeout=END_WITHIN)
        reader.join()
        proc.stdout.close()
        out = b"".join(chunks).decode("utf-8", "replace")
        for root, dirs, files in os.walk(cwd):  # the caller's again, before the sweep removes the user's files
            for entry in [root] + [os.path.join(root, n) for n in dirs + files]:
                os.lchown(entry, 0, 0)
        _clean(uid)
    finally:
        _LIVE.discard(marker)
        if home:
            shutil.rmtree(home, ignore_errors=True)
    return subprocess.CompletedProcess(command, code, out or "")


def main(argv=None) -> int:
    """``python3 untrusted.py [--copy DIR] [--env K=V]... [--timeout S] -- COMMAND...``: run a
    command (a repository's own test suite) as uid 64999 in a fresh copy of ``DIR`` (or a fresh
    empty directory), print its output, exit with its status (124 past the timeout). The folder
    this file is in (``/tests``) is made root-only after the copy, before the command starts: the
    suite runs the agent's code, which must not read the private tests. For tests/test.sh, whose
    gate must not run the agent's code as root."""
    import argparse

    parser = argparse.ArgumentParser(prog="untrusted.py")
    parser.add_argument("--copy", default=None)
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    work = tempfile.mkdtemp(prefix="aes-untrusted-run-")
    try:
        if args.copy:
            shutil.copytree(args.copy, work, dirs_exist_ok=True, symlinks=True)
        env = dict(item.split("=", 1) for item in args.env)
        done = run_as_untrusted(command, work, timeout=args.timeout, env=env,
                                private=[os.path.dirname(os.path.abspath(__file__))])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.stdout.write(done.stdout)
    if done.returncode is None:
        print(f"timed out after {args.timeout:g} s")
        return 124
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
