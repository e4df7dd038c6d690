"""Task images: content-hashed build contexts, base-image aliases, time-limited builds under
memory, CPU and process caps (:mod:`aes.sandbox.buildcaps`).

The tag of a task image is a hash of everything that goes into it (the files of
``environment/`` that .dockerignore keeps, the Dockerfile after base-image
substitution, and the id of each base image), so an unchanged environment is
never rebuilt and two tasks that share an environment share an image.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import socket
import stat
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field

import docker.errors
from docker.utils.build import exclude_paths

from aes.config import SandboxConfig
from aes.sandbox import limits
from aes.sandbox.buildcaps import BuildCgroup, cgroup_support
from aes.sandbox.docker_client import connect, image_labels
from aes.sandbox.network import isolated_network
from aes.tasks import Reason, Task
from aes.tasks.static import dockerfile_instructions

log = logging.getLogger(__name__)

IMAGE_REPO = "aes-env"
BUILD_LOG_TAIL = 8192
_FROM = re.compile(r"^(\s*FROM\s+(?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE | re.MULTILINE)


@dataclass
class BuildResult:
    """The outcome of building a task's image."""

    image: str | None
    """Tag of the built (or cached) image; None when the build failed."""
    cached: bool = False
    seconds: float = 0.0
    log_tail: str = ""
    reason: Reason | None = None
    substitutions: list[str] = field(default_factory=list)
    """``public -> local`` base images that were substituted."""
    base: str | None = None
    """The image the final stage builds on (after substitution); None for a prebuilt ``docker_image``
    or a base that cannot be told (``scratch``, a build argument)."""


def _normalise(ref: str) -> str:
    name = ref.rsplit("/", 1)[-1]
    return ref if ":" in name or "@" in ref else f"{ref}:latest"


class ImageBuilder:
    """Builds task images on the Docker engine; safe to share between threads."""

    def __init__(self, cfg: SandboxConfig):
        self.cfg = cfg
        self.client = connect(cfg)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._pull_failed: set[str] = set()
        self._warned: set[str] = set()
        self._aliases = {_normalise(k): v for k, v in cfg.image_aliases.items()}
        self.network = isolated_network(self.client, cfg)
        info = self.client.info()
        self.caps = limits.build_caps(cfg, float(info.get("NCPU") or 1), int((info.get("MemTotal") or 0) // 2**20))
        self.cgroup_version, why = cgroup_support(self.client, info) if self.caps.pids else (None, "")
        if why:
            log.warning("image builds run without a process cap (sandbox.build_pids_limit): %s. Memory and CPU "
                        "caps still apply", why)

    # -- base images -------------------------------------------------------------------
    def _local_image_id(self, ref: str) -> str | None:
        try:
            return self.client.images.get(ref).id
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.APIError:
            return None

    def resolve_base(self, ref: str) -> tuple[str, str | None, Reason | None]:
        """(image to build from, its id, failure): local copy, a pull, or the alias."""
        image_id = self._local_image_id(ref)
        if image_id:
            return ref, image_id, None
        key = _normalise(ref)
        if self.cfg.pull_missing and key not in self._pull_failed:
            if self._pull(key):
                return ref, self._local_image_id(ref), None
            self._pull_failed.add(key)
        alias = self._aliases.get(key)
        if alias is None:
            return ref, None, Reason(
                "build.base_unavailable",
                f"base image {ref!r} is not present and cannot be pulled, and "
                f"sandbox.image_aliases has no local substitute for it",
            )
        alias_id = self._local_image_id(alias)
        if alias_id is None:
            return ref, None, Reason(
                "build.base_unavailable",
                f"base image {ref!r} cannot be pulled and its substitute {alias!r} does not "
                "exist: run `aes sandbox bootstrap`",
            )
        if key not in self._warned:
            self._warned.add(key)
            log.warning("using local %s in place of %s (it cannot be pulled)", alias, ref)
        return alias, alias_id, None

    def _pull(self, ref: str) -> bool:
        """Pull ``ref`` within ``sandbox.pull_timeout_sec``; False if it cannot be had in time."""
        repo, _, tag = ref.rpartition(":") if "@" not in ref else (ref, "", "")
        api = self.client.api
        try:
            response = api.post(f"{api.base_url}/v{api.api_version}/images/create",
                                params={"fromImage": repo or ref, "tag": tag or None}, stream=True, timeout=(30, None))
        except Exception:  # noqa: BLE001 - an engine that cannot reach a registry: fall back to the alias
            return False
        fired = threading.Event()
        timer = threading.Timer(self.cfg.pull_timeout_sec, _abort_response, args=(response, fired))
        timer.daemon = True
        timer.start()
        try:
            if response.status_code >= 400:
                return False
            for raw in response.iter_lines():
                if raw and b'"error"' in raw:
                    return False
        except Exception:  # noqa: BLE001 - cut by the timer, or the engine went away
            return False
        finally:
            timer.cancel()
            response.close()
        if fired.is_set():
            log.warning("pulling %s took longer than sandbox.pull_timeout_sec=%g s: gave up", ref, self.cfg.pull_timeout_sec)
            return False
        return self._local_image_id(ref) is not None

    def rewrite_from(self, dockerfile: str) -> tuple[str, list[str], list[str], Reason | None]:
        """Dockerfile with substituted bases, substitutions made, base ids, first failure."""
        stages = {args.split()[-1].lower() for word, args, _ in dockerfile_instructions(dockerfile)
                  if word == "FROM" and len(args.split()) >= 3 and args.split()[-2].upper() == "AS"}
        subs, ids, failure = [], [], None

        def replace(match: re.Match[str]) -> str:
            nonlocal failure
            ref = match.group(2)
            if ref.lower() in stages or "$" in ref or ref == "scratch":
                return match.group(0)
            image, image_id, reason = self.resolve_base(ref)
            failure = failure or reason
            ids.append(image_id or "")
            if image != ref:
                subs.append(f"{ref} -> {image}")
            return f"{match.group(1)}{image}{match.group(3)}"

        return _FROM.sub(replace, dockerfile), subs, ids, failure

    # -- context -----------------------------------------------------------------------
    def _context(self, task: Task, dockerfile: str) -> tuple[tempfile.SpooledTemporaryFile, str]:
        """A tar of the build context (Dockerfile replaced) and its content hash."""
        root = task.environment_dir
        ignore = root / ".dockerignore"
        patterns = _read_head(ignore, MAX_DOCKERIGNORE_BYTES).splitlines() if ignore.is_file() else []
        patterns = [p.strip() for p in patterns if p.strip() and not p.strip().startswith("#")]
        names = sorted(p for p in exclude_paths(str(root), patterns, dockerfile="Dockerfile")
                       if p != "Dockerfile")
        digest = hashlib.sha256(b"aes-context-v1\0")
        buf = tempfile.SpooledTemporaryFile(max_size=32 * 1024 * 1024)
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name in names:
                path = root / name
                info = tar.gettarinfo(str(path), arcname=name)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                mode = os.lstat(path).st_mode
                digest.update(f"{name}\0{info.type!r}\0{mode & 0o777:o}\0{info.linkname}\0".encode())
                if stat.S_ISREG(mode):
                    with _open_regular(path) as fh:
                        reader = _HashingReader(fh)
                        tar.addfile(info, reader)  # streamed: reads exactly info.size bytes
                    digest.update(reader.sha.digest())
                elif stat.S_ISDIR(mode) or stat.S_ISLNK(mode):
                    tar.addfile(info)
            data = dockerfile.encode()
            digest.update(b"Dockerfile\0" + hashlib.sha256(data).digest())
            info = tarfile.TarInfo("Dockerfile")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        buf.seek(0)
        return buf, digest.hexdigest()

    # -- build -------------------------------------------------------------------------
    def _lock(self, tag: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(tag, threading.Lock())

    def build(self, task: Task) -> BuildResult:
        """Build (or reuse) the image of ``task`` within its build timeout."""
        start = time.monotonic()
        if task.spec.docker_image:
            image, _, reason = self.resolve_base(task.spec.docker_image)
            return BuildResult(image=None if reason else image, cached=True, reason=reason,
                               seconds=time.monotonic() - start)
        text = task.dockerfile.read_text(encoding="utf-8", errors="replace")
        dockerfile, subs, base_ids, failure = self.rewrite_from(text)
        if failure:
            return BuildResult(image=None, reason=failure, substitutions=subs,
                               seconds=time.monotonic() - start)
        base = final_base(dockerfile)
        context, digest = self._context(task, dockerfile)
        digest = hashlib.sha256((digest + "\0" + "\0".join(base_ids)).encode()).hexdigest()
        tag = f"{IMAGE_REPO}:{digest[:24]}"
        with context, self._lock(tag):
            if self._local_image_id(tag):
                return BuildResult(image=tag, cached=True, substitutions=subs, base=base,
                                   seconds=time.monotonic() - start)
            ok, log_tail, reason = self._run_build(context, tag, task, limits.build_timeout(self.cfg, task))
        return BuildResult(image=tag if ok else None, log_tail=log_tail, reason=reason,
                           substitutions=subs, base=base, seconds=time.monotonic() - start)

    def _run_build(self, context, tag: str, task: Task, timeout: float) -> tuple[bool, str, Reason | None]:
        cgroup = BuildCgroup(self.caps, self.cgroup_version) if self.cgroup_version else None
        if cgroup is not None:
            try:
                cgroup.__enter__()
            except OSError as exc:
                log.warning("%s: its build cgroup could not be set up (%s): built without the process cap",
                            task.name, exc)
                cgroup.__exit__(None, None, None)
                cgroup = None
        try:
            return self._stream_build(context, tag, task, timeout, cgroup)
        finally:
            if cgroup is not None:
                cgroup.__exit__(None, None, None)

    def _stream_build(self, context, tag: str, task: Task, timeout: float,
                      cgroup: BuildCgroup | None) -> tuple[bool, str, Reason | None]:
        api = self.client.api
        params = {"t": tag, "rm": "1", "forcerm": "1", "q": "0", "networkmode": self.network,
                  "labels": json.dumps(image_labels("task", task.name)), **self.caps.params(cgroup)}
        response = api.post(
            f"{api.base_url}/v{api.api_version}/build", params=params, data=context,
            headers={"Content-Type": "application/x-tar"}, stream=True, timeout=(30, None),
        )
        fired = threading.Event()
        timer = threading.Timer(timeout, _abort_response, args=(response, fired))
        timer.daemon = True
        timer.start()
        lines: list[str] = []
        error = None
        try:
            if response.status_code >= 400:
                error = response.text.strip()
            else:
                for raw in response.iter_lines():
                    if not raw:
                        continue
                    try:
                        msg = json.loads(raw)
                    except ValueError:
                        continue
                    if "stream" in msg:
                        lines.append(msg["stream"])
                    if "error" in msg:
                        error = msg["error"]
        except Exception as exc:  # the connection was cut by the timer, or the daemon went away
            error = error or f"build stream broke: {exc}"
        finally:
            timer.cancel()
            response.close()
        tail = "".join(lines)[-BUILD_LOG_TAIL:]
        if self._local_image_id(tag) and error is None:
            if cgroup is None or not cgroup.hit()["pids"]:
                return True, tail, None
            self._untag(tag)  # its steps ignored the refused forks: not an image to keep or reuse
            error = "a step ran into the process cap"
        if fired.is_set():
            return False, tail, Reason("build.timeout", f"image build exceeded {timeout:.0f} s (build_timeout_sec)")
        last = "\n".join(tail.strip().splitlines()[-12:])
        return False, tail, self._cap_reason(cgroup, str(error), last) or \
            Reason("build.failed", f"docker build failed: {error}\n{last}".strip())

    def _untag(self, tag: str) -> None:
        try:
            self.client.images.remove(tag, force=True)
        except docker.errors.APIError as exc:
            log.warning("could not remove the image %s of a build that failed its caps: %s", tag, exc)

    def _cap_reason(self, cgroup: BuildCgroup | None, error: str, last: str) -> Reason | None:
        """The cap a failed build ran into, if any: its cgroup's counters say so (without one, a step
        killed by SIGKILL, exit status 137, is taken for the memory cap)."""
        hit = cgroup.hit() if cgroup is not None else {"pids": False, "memory": False}
        killed = "non-zero code: 137" in error
        if hit["pids"]:
            return Reason("build.process_limit", (
                f"a RUN step tried to run more than {self.caps.pids} processes at once (sandbox.build_pids_limit): "
                f"a build step may not fork without bound\n{last}").strip())
        if killed and self.caps.memory_mb and (hit["memory"] or cgroup is None):
            return Reason("build.memory_limit", (
                f"a RUN step was killed for using more than {self.caps.memory_mb} MiB of memory "
                f"(sandbox.build_memory_mb): {error}\n{last}").strip())
        return None


def final_base(dockerfile: str) -> str | None:
    """The image the Dockerfile's final stage starts from, following ``FROM <stage>`` to the
    stage's own base; None for ``scratch`` or a reference with a build argument."""
    stages: dict[str, str] = {}
    ref = None
    for word, args, _ in dockerfile_instructions(dockerfile):
        if word != "FROM":
            continue
        parts = [a for a in args.split() if not a.startswith("--")]
        if not parts:
            continue
        ref = stages.get(parts[0].lower(), parts[0])
        if len(parts) >= 3 and parts[-2].upper() == "AS":
            stages[parts[-1].lower()] = ref
    return None if ref is None or "$" in ref or ref == "scratch" else ref


MAX_DOCKERIGNORE_BYTES = 1 << 20
"""Most bytes of environment/.dockerignore read (static checks reject a larger one)."""


class _HashingReader:
    """A file wrapper that hashes what is read through it, so a context file is read once,
    in the chunks ``tarfile`` asks for, and its hash is that of the bytes put into the tar."""

    def __init__(self, fh):
        self.fh = fh
        self.sha = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.fh.read(size)
        self.sha.update(data)
        return data


def _open_regular(path, follow: bool = False):
    """Open a context file for reading without following a symlink (unless ``follow``) or
    blocking on a FIFO that replaced it after the walk; OSError if it is not a regular file."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    fh = open(fd, "rb", closefd=True)
    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
        fh.close()
        raise OSError(f"{path} is no longer a regular file")
    return fh


def _read_head(path, limit: int) -> str:
    """At most ``limit`` bytes of a small text file, decoded leniently ("" if it is not a file)."""
    try:
        with _open_regular(path, follow=True) as fh:
            return fh.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _abort_response(response, fired: threading.Event) -> None:
    """Cut a streaming build connection; the daemon then cancels the build."""
    fired.set()
    sock = None
    try:
        sock = response.raw._fp.fp.raw._sock  # the connection's socket (unix or tcp)
    except AttributeError:
        pass
    try:
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
        else:
            response.close()
    except OSError:
        pass
