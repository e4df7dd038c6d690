"""Call the agent's code from a test without running it in the process that decides the reward.

A test that imports the code under test runs that code inside pytest: from there it can rewrite
the report (pytest's hooks, the junit file, an atexit handler, ``os._exit(0)``), read the
expected values from the test file, or, as root, edit the tests and the reward script before
they run. So tests of agent-written code (a repository's fix, a kernel) keep the agent's code in
a child process that runs as an unprivileged user (uid/gid 64999, no groups, a fresh HOME and
working directory of its own, a cleared environment, ``python3 -I``) and exchange plain values
with it only:

* a request is ``repr((target, args, kwargs))``; ``target`` names a callable by module and
  attribute path (``"telemetry.window_index"``, ``"pkg.Class.method"`` for static ones); the
  reply is ``repr(("ok", value))`` or ``repr(("raise", [class names of the exception's MRO],
  message))``. Both sides read them with :func:`ast.literal_eval` - never ``pickle``, never
  ``eval`` - so a reply is data: ints, floats, strings, bytes, tuples, lists, dicts, sets, None,
  bools, and tensors as ``{"__tensor__": (dtype, shape, raw bytes)}`` (rebuilt in the test's
  process only when it has imported torch);
* an exception raised by the agent's code comes back as the first built-in class in its MRO
  (a ``ValidationError(ValueError)`` is raised as ``ValueError`` with the same message), so
  ``pytest.raises(ValueError)`` works;
* the child may run helper modules the test hands over as source text (``helpers``), e.g. a
  harness that builds the agent's model and runs it; they execute with the agent's code and their
  results are the child's word, no more;
* before the first child starts, the test's own directory is made readable by root only and
  ``/logs/verifier`` unwritable by others (where they exist and the test runs as root), so the
  child can neither read the expected values nor write a reward.

The test must run as root (Harbor's and aes's verifier user): only root can start a child as
another user. This file is stdlib only and is copied verbatim into a task's ``tests/``
(``aes/domains/kit/untrusted.py`` is the original; a test checks the seeds' copies).
"""

from __future__ import annotations

import ast
import builtins
import os
import shutil
import subprocess
import sys
import tempfile

UID = 64999
PROTECTED = ("/logs/verifier",)
PATH = "/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin"

_SERVER = r'''
import ast, importlib, os, sys
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
        if not isinstance(exc, Exception):
            exc = RuntimeError(f"{type(exc).__name__} raised by the code under test")
        reply = repr(("raise", [c.__name__ for c in type(exc).__mro__], str(exc)[:2000]))
    proto_out.write(reply + "\n")
    proto_out.flush()
'''


class UntrustedError(RuntimeError):
    """The child broke the protocol: it died, timed out, or answered with something not data."""


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
        return flat.view(getattr(torch, dtype)).reshape(tuple(shape)).clone()
    if isinstance(value, tuple):
        return tuple(_decode(v) for v in value)
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        return {k: _decode(v) for k, v in value.items()}
    return value


def _builtin_exception(names: list, message: str) -> BaseException:
    for name in names:
        cls = getattr(builtins, str(name), None)
        if isinstance(cls, type) and issubclass(cls, Exception):
            return cls(message)
    return RuntimeError(message)


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
        _protect(list(private if private is not None else [caller]) + list(PROTECTED))
        self.timeout, self.max_reply = timeout, max_reply
        self.home = tempfile.mkdtemp(prefix="aes-untrusted-")
        for name, source in (helpers or {}).items():
            with open(os.path.join(self.home, f"{name}.py"), "w") as f:
                f.write(source)
        for root, dirs, files in os.walk(self.home):
            for entry in [root] + [os.path.join(root, n) for n in dirs + files]:
                os.chown(entry, uid, uid)
        child_env = {"PATH": PATH, "HOME": self.home, "TMPDIR": self.home, "LANG": "C.UTF-8",
                     "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
        path = [self.home] + [str(p) for p in paths]
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _SERVER, repr(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=None, cwd=self.home, env=child_env, user=uid, group=uid, extra_groups=[], text=False,
            close_fds=True, start_new_session=True)

    def call(self, target: str, *args, **kwargs):
        """Call ``target(*args, **kwargs)`` in the child; its return value, or its exception raised here."""
        if self.proc.poll() is not None:
            raise UntrustedError(f"the child running the code under test has exited ({self.proc.returncode})")
        request = repr((target, _encode(args), _encode(kwargs)))
        ast.literal_eval(request)  # only data goes over
        reply = self._exchange(request)
        try:
            kind, *rest = ast.literal_eval(reply)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
            raise UntrustedError(f"the code under test answered {target} with something that is not data ({exc})") from None
        if kind == "ok" and len(rest) == 1:
            return _decode(rest[0])
        if kind == "bad" and len(rest) == 1:
            raise UntrustedError(f"{rest[0]} (numbers, strings, bytes, tuples, lists, dicts, sets, None, tensors): "
                                 "turn it into plain values in a helper that runs in the child")
        if kind == "raise" and len(rest) == 2 and isinstance(rest[0], list):
            raise _builtin_exception(rest[0], str(rest[1]))
        raise UntrustedError(f"the code under test broke the protocol answering {target}")

    def value(self, target: str):
        """The value of ``target`` (a module attribute such as ``"pkg.__all__"``) in the child, as data."""
        return self.call("=" + target)

    def module(self, name: str) -> "Remote":
        """``name`` as an object whose attribute calls run in the child: ``m.f(1)`` is ``call("name.f", 1)``."""
        return Remote(self, name)

    def _exchange(self, request: str) -> str:
        import selectors
        import time

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
        """Kill the child and everything it started (its own session), remove its home."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except ProcessLookupError:
                pass
        self.proc.wait()
        shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Remote:
    """A module or attribute path in the child (see :meth:`Untrusted.module`): attribute access
    extends the path, a call runs it there, :meth:`value` reads it."""

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


def run_as_untrusted(command, cwd: str, *, timeout: float = 300.0, env: dict | None = None, uid: int = UID):
    """Run ``command`` (argv) as uid 64999 in ``cwd`` (handed to that user) with a cleared
    environment; its :class:`subprocess.CompletedProcess` (stdout and stderr together, text), or
    ``returncode`` None when it ran past ``timeout``. For a repository's own test suite, whose
    exit status is all the caller reads."""
    _protect(list(PROTECTED))
    for root, dirs, files in os.walk(cwd):
        for entry in [root] + [os.path.join(root, n) for n in dirs + files]:
            os.lchown(entry, uid, uid)
    home = tempfile.mkdtemp(prefix="aes-untrusted-")
    os.chown(home, uid, uid)
    child_env = {"PATH": PATH, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    proc = subprocess.Popen(command, cwd=cwd, env=child_env, user=uid, group=uid, extra_groups=[], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        out, code = "", None
    finally:
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        proc.wait()
        shutil.rmtree(home, ignore_errors=True)
    return subprocess.CompletedProcess(command, code, out or "")


def main(argv=None) -> int:
    """``python3 untrusted.py [--copy DIR] [--env K=V]... [--timeout S] -- COMMAND...``: run a
    command (a repository's own test suite) as uid 64999 in a fresh copy of ``DIR`` (or a fresh
    empty directory), print its output, exit with its status (124 past the timeout). For
    tests/test.sh, whose gate must not run the agent's code as root."""
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
        done = run_as_untrusted(command, work, timeout=args.timeout, env=env)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.stdout.write(done.stdout)
    if done.returncode is None:
        print(f"timed out after {args.timeout:g} s")
        return 124
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
