"""Carry the agent's file changes from its (paused) container into the sealed verifier's.

Which changes are carried is decided by :class:`~aes.sandbox.seal.SealPolicy`; this module
finds the changes, reads them and writes one archive that recreates them, plus the list of
paths to delete. Two ways to find and read them, with the same result:

* on the engine's own host with overlay2 (the usual case) the container's writable layer is
  read directly: its upper directory says what changed (whiteouts are deletions, opaque
  directories were replaced), its merged view gives the content. Paths are opened one
  component at a time without following symlinks, so nothing the agent wrote can send the
  host-side reader outside the container's file system;
* anywhere else through the engine's API (``docker diff`` and archive downloads), slower
  (:mod:`aes.sandbox.carry_api`).

Every symlink or hard link to a regular file is carried as a copy of that file: a carried path
can never alias a file the verifier writes later. A symlink to a data directory stays a link
(:func:`dir_link_allowed`); dangling links, other links to directories and special files are
dropped. Set-user/group-ID bits are cleared. A git repository's
``config`` is rebuilt from git's own reading of it without its command-valued keys
(:mod:`aes.sandbox.gitconfig`), and ``/etc/passwd`` from the pristine image's
(:mod:`aes.sandbox.accounts`).
"""

from __future__ import annotations

import io
import logging
import os
import posixpath
import stat
import tarfile
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Iterator

import docker.errors

from aes.sandbox import gitconfig
from aes.sandbox.seal import SealPolicy

log = logging.getLogger(__name__)

SPOOL_BYTES = 16 << 20
_MAX_HOPS = 40
SCRATCH_DIRS = ("/tmp", "/var/tmp")
"""Shared scratch space: what the agent leaves there is carried owned by the verifier's user and
writable by it, so a read-only file the agent planted at a name the tests write (``echo 42 >
/tmp/expected.txt``) cannot make the tests compare against the agent's copy."""
GIT_CONFIG_MAX_BYTES = 1 << 20
"""A repository configuration larger than this is not carried (git's own are a few hundred bytes)."""
DEFAULT_MAX_SECONDS = 120.0
LOOK_FACTOR = 4
TRANSFORM_MAX_BYTES = 4 << 20
"""A file rebuilt from the pristine image's (``/etc/passwd``) larger than this is not carried."""


class CarryError(RuntimeError):
    """The agent's changes cannot be carried (too large, too many): the attempt scores 0."""


@dataclass
class Carry:
    """What the verifier's container receives: an archive to extract at ``/`` and deletions."""

    archive: BinaryIO | None = None
    deletions: list[str] = field(default_factory=list)
    files: int = 0
    bytes: int = 0
    skipped: Counter = field(default_factory=Counter)
    """Reason -> number of changed paths not carried."""
    examples: dict[str, list[str]] = field(default_factory=dict)
    """Reason -> the first few paths not carried for it."""
    links: int = 0
    """Symlinks to data directories, carried as links."""
    sanitized: dict[str, list[str]] = field(default_factory=dict)
    """Git configuration files carried without these command-valued keys."""
    method: str = ""
    paths: set[str] = field(default_factory=set)
    """The regular files carried (what the tamper audit watches)."""
    shadow: frozenset[str] = frozenset()
    """Module names a carried file was not allowed to take (the audit treats loading one as a shadow)."""

    def skip(self, why: str, path: str) -> None:
        self.skipped[why] += 1
        seen = self.examples.setdefault(why, [])
        if len(seen) < 8:
            seen.append(path)

    def summary(self) -> str:
        links = f", {self.links} directory link(s)" if self.links else ""
        parts = [f"carried {self.files} file(s){links}, {self.bytes} bytes, {len(self.deletions)} deletion(s) "
                 f"({self.method})"]
        if self.skipped:
            top = ", ".join(f"{n} x {why}" for why, n in self.skipped.most_common(4))
            parts.append(f"not carried: {top}")
        for path, keys in list(self.sanitized.items())[:3]:
            parts.append(f"{path} carried without {', '.join(keys[:6])}")
        return "; ".join(parts)

    def close(self) -> None:
        if self.archive is not None:
            self.archive.close()


class _Writer:
    """Writes carried entries to a spooled tar, within entry and byte limits.

    ``is_repository``: whether a directory is one git reads a configuration from
    (:func:`~aes.sandbox.gitconfig.is_git_dir`), so that its ``config`` is rebuilt as data.
    """

    def __init__(self, max_entries: int, max_bytes: int, carry: Carry | None = None,
                 is_repository: Callable[[str], bool] = lambda path: False,
                 scratch_owner: tuple[int, int] | None = None,
                 transforms: dict[str, Callable[[bytes], bytes]] | None = None,
                 max_seconds: float = DEFAULT_MAX_SECONDS):
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self.max_seconds, self.deadline = max_seconds, time.monotonic() + max_seconds
        self.looked = 0
        self.carry, self.is_repository = carry, is_repository
        self.scratch_owner = scratch_owner
        self.transforms = transforms or {}
        self.buf = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
        self.tar = tarfile.open(fileobj=self.buf, mode="w", format=tarfile.GNU_FORMAT)
        self.entries = self.files = self.bytes = 0
        self.seen: set[str] = set()

    def _owned(self, path: str, mode: int, uid: int, gid: int, bits: int) -> tuple[int, int, int]:
        """(mode, uid, gid) of an entry: in scratch space, the verifier's user owns it and may write it."""
        if any(path.startswith(d + "/") for d in SCRATCH_DIRS):
            uid, gid = self.scratch_owner or (uid, gid)
            mode |= bits
        return mode, uid, gid

    def _add(self, info: tarfile.TarInfo, handle: BinaryIO | None = None) -> None:
        self.tar.addfile(info, handle)
        self.tar.members.clear()  # tarfile keeps every member it wrote; the carry never looks them up

    def look(self) -> None:
        """One more changed path looked at (carried or not): within 4 x the entry limit and the time limit."""
        self.looked += 1
        if self.looked > LOOK_FACTOR * self.max_entries:
            raise CarryError(f"the agent changed more than {LOOK_FACTOR * self.max_entries} paths, counting those not "
                             f"carried (4 x sandbox.max_carry_entries)")
        if self.looked % 256 == 0:
            self.in_time()

    def in_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise CarryError(f"reading the agent's changes took more than {self.max_seconds:.0f} s "
                             f"(sandbox.max_carry_sec; {self.looked} paths looked at, {self.entries} carried)")

    def _count(self, size: int) -> None:
        self.entries += 1
        self.bytes += size
        if self.entries > self.max_entries:
            raise CarryError(f"the agent changed more than {self.max_entries} paths (sandbox.max_carry_entries)")
        if self.bytes > self.max_bytes:
            raise CarryError(f"the agent's changes exceed {self.max_bytes >> 20} MiB (the task's storage limit)")

    def directory(self, path: str, mode: int, uid: int, gid: int, mtime: float) -> None:
        if path in self.seen:
            return
        self.seen.add(path)
        self._count(0)
        mode, uid, gid = self._owned(path, mode, uid, gid, 0o700)
        info = tarfile.TarInfo(path.lstrip("/"))
        info.type, info.mode = tarfile.DIRTYPE, stat.S_IMODE(mode) & ~0o6000
        info.uid, info.gid, info.mtime = uid, gid, int(mtime)
        self._add(info)

    def file(self, path: str, handle: BinaryIO, size: int, mode: int, uid: int, gid: int, mtime: float) -> None:
        if path in self.seen:
            return
        parent = posixpath.dirname(path)
        if path in self.transforms:
            if size > TRANSFORM_MAX_BYTES:
                if self.carry is not None:
                    self.carry.skip("files rebuilt from the pristine image's, over 4 MiB", path)
                return
            data = self.transforms[path](handle.read(TRANSFORM_MAX_BYTES))
            handle, size = io.BytesIO(data), len(data)
        elif posixpath.basename(path) in gitconfig.CONFIG_NAMES and self.is_repository(parent):
            handle, size = self._git_config(path, handle, size)
            if handle is None:
                return
        self.seen.add(path)
        self._count(size)
        mode, uid, gid = self._owned(path, mode, uid, gid, 0o600)
        info = tarfile.TarInfo(path.lstrip("/"))
        info.size, info.mode = size, stat.S_IMODE(mode) & ~0o6000
        info.uid, info.gid, info.mtime = uid, gid, int(mtime)
        self._add(info, handle)
        self.files += 1
        if self.carry is not None:
            self.carry.paths.add(path)

    def _git_config(self, path: str, handle: BinaryIO, size: int) -> tuple[BinaryIO | None, int]:
        """The repository configuration at ``path`` without its command-valued keys."""
        if size > GIT_CONFIG_MAX_BYTES:
            if self.carry is not None:
                self.carry.skip("git configuration over 1 MiB", path)
            return None, 0
        text, dropped = gitconfig.sanitize(handle.read(GIT_CONFIG_MAX_BYTES).decode("utf-8", "surrogateescape"))
        if dropped and self.carry is not None:
            self.carry.sanitized[path] = dropped
        data = text.encode("utf-8", "surrogateescape")
        return io.BytesIO(data), len(data)

    def symlink(self, path: str, target: str, uid: int, gid: int, mtime: float) -> None:
        """A symlink to a data directory (:func:`dir_link_allowed` decided it may stay a link)."""
        if path in self.seen:
            return
        self.seen.add(path)
        self._count(0)
        info = tarfile.TarInfo(path.lstrip("/"))
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
        info.uid, info.gid, info.mtime = uid, gid, int(mtime)
        self._add(info)
        if self.carry is not None:
            self.carry.links += 1

    def check_deletions(self, carry: Carry) -> None:
        """Deletions count against the same limit as carried entries (each is a command to run)."""
        if self.entries + len(carry.deletions) > self.max_entries:
            raise CarryError(f"the agent changed more than {self.max_entries} paths (sandbox.max_carry_entries)")

    def finish(self, carry: Carry) -> Carry:
        self.tar.close()
        self.buf.seek(0)
        carry.archive, carry.files, carry.bytes = self.buf, self.files, self.bytes
        return carry


# -- the host-side reader (overlay2 on this host) ------------------------------------------------
class SafeTree:
    """Read-only access below a directory on the host, never following a symlink on the way."""

    def __init__(self, root: str):
        self.root = root

    def _parent_fd(self, path: str) -> tuple[int, str]:
        parts = [p for p in path.strip("/").split("/") if p]
        if not parts:
            raise FileNotFoundError(path)
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in parts[:-1]:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except OSError:
            os.close(fd)
            raise
        return fd, parts[-1]

    def lstat(self, path: str) -> os.stat_result | None:
        try:
            fd, name = self._parent_fd(path)
        except OSError:
            return None
        try:
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            return None
        finally:
            os.close(fd)

    def readlink(self, path: str) -> str | None:
        try:
            fd, name = self._parent_fd(path)
        except OSError:
            return None
        try:
            return os.readlink(name, dir_fd=fd)
        except OSError:
            return None
        finally:
            os.close(fd)

    def open_regular(self, path: str) -> tuple[BinaryIO, os.stat_result] | None:
        """An open regular file at ``path`` (no symlink anywhere on the way), else None."""
        try:
            fd, name = self._parent_fd(path)
        except OSError:
            return None
        try:
            handle = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        except OSError:
            return None
        finally:
            os.close(fd)
        st = os.fstat(handle)
        if not stat.S_ISREG(st.st_mode):
            os.close(handle)
            return None
        return os.fdopen(handle, "rb"), st

    def resolve(self, path: str) -> str | None:
        """``path`` with every symlink resolved inside this tree (None: dangling or a loop)."""
        todo = [p for p in path.strip("/").split("/") if p]
        done: list[str] = []
        hops = 0
        while todo:
            part = todo.pop(0)
            if part == ".":
                continue
            if part == "..":
                if done:
                    done.pop()
                continue
            current = "/" + "/".join([*done, part])
            st = self.lstat(current)
            if st is None:
                return None
            if stat.S_ISLNK(st.st_mode):
                hops += 1
                target = self.readlink(current)
                if target is None or hops > _MAX_HOPS:
                    return None
                if target.startswith("/"):
                    done = []
                todo = [p for p in target.split("/") if p] + todo
                continue
            done.append(part)
        return "/" + "/".join(done)


def _regular(st: os.stat_result | None) -> bool:
    return st is not None and stat.S_ISREG(st.st_mode)


def _xattr(path: str, name: str) -> bytes | None:
    try:
        return os.getxattr(path, name, follow_symlinks=False)
    except OSError:
        return None


def _kernel_overlay(mount_point: str) -> bool:
    """Whether ``mount_point`` is a kernel overlay mount (trusted.* xattrs) in this mount namespace."""
    target = os.path.realpath(mount_point)
    try:
        with open("/proc/self/mountinfo") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return False
    found = False
    for line in lines:
        fields = line.split()
        if len(fields) < 10 or "-" not in fields:
            continue
        sep = fields.index("-")
        point = fields[4].encode().decode("unicode_escape")  # octal escapes (\040) as in the kernel
        if point != target or len(fields) < sep + 4:
            continue
        fstype, options = fields[sep + 1], fields[sep + 3].split(",")
        found = fstype == "overlay" and "userxattr" not in options  # the last mount there wins
    return found


PODMAN_FILES = frozenset({"/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/etc/mtab", "/run/.containerenv",
                          "/run/podman-init"})
"""What Podman itself puts in a container's upper layer (mount points of files it bind-mounts; its
own ``diff`` leaves them out too): not the agent's changes, and the verifier's container has its own."""


def host_layer(container) -> tuple[str, str, frozenset[str]] | None:
    """(upper dir, merged dir, the engine's own files in it) of a container whose overlay layer
    this process can read."""
    try:
        driver = container.api.inspect_container(container.id).get("GraphDriver") or {}
    except docker.errors.APIError:
        return None
    data = driver.get("Data") or {}
    upper, merged = data.get("UpperDir"), data.get("MergedDir")
    if not upper or not merged:
        return None
    # Docker's overlay2, or Podman's "overlay" when it is the kernel's overlay with trusted.*
    # xattrs (not fuse-overlayfs or a rootless "userxattr" mount, whose whiteouts and opaque
    # marks differ): anything else is read through the engine's API.
    if driver.get("Name") != "overlay2" and not (driver.get("Name") == "overlay" and _kernel_overlay(merged)):
        return None
    if not (os.path.isdir(upper) and os.path.isdir(merged) and os.access(upper, os.R_OK | os.X_OK)):
        return None
    return upper, merged, (frozenset() if driver.get("Name") == "overlay2" else PODMAN_FILES)


def carry_from_host(upper: str, merged: str, policy: SealPolicy, pristine: Callable[[str], bool],
                    max_entries: int, max_bytes: int, engine_files: frozenset[str] = frozenset(),
                    scratch_owner: tuple[int, int] | None = None,
                    transforms: dict[str, Callable[[bytes], bytes]] | None = None,
                    max_seconds: float = DEFAULT_MAX_SECONDS) -> Carry:
    """The carry of a paused container read from its overlay2 layer on this host (``engine_files``:
    paths the engine, not the agent, put there; ``transforms``: path -> what its carried content
    is made of, e.g. the account database rebuilt from the pristine image's)."""
    carry = Carry(method="overlay2 layer")
    tree = SafeTree(merged)
    writer = _Writer(max_entries, max_bytes, carry,
                     lambda d: gitconfig.is_git_dir(posixpath.basename(d), lambda e: tree.lstat(f"{d}/{e}") is not None),
                     scratch_owner, transforms, max_seconds)
    try:
        for path, entry_st, opaque, redirected in _walk_upper(upper):
            writer.look()
            if path in engine_files:
                continue
            _host_entry(path, entry_st, opaque, redirected, tree, policy, pristine, carry, writer)
        writer.check_deletions(carry)
    except BaseException:
        writer.tar.close()
        writer.buf.close()
        raise
    return writer.finish(carry)


def _walk_upper(upper: str) -> Iterator[tuple[str, os.stat_result, bool, bool]]:
    """(container path, lstat, opaque dir, redirected dir) of each entry of the upper layer;
    the subtree of a redirected (renamed) directory is not walked: its content is read from
    the merged view."""
    stack = ["/"]
    while stack:
        rel = stack.pop()
        host_dir = os.path.join(upper, rel.lstrip("/"))
        try:
            entries = sorted(os.scandir(host_dir), key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for entry in entries:
            path = posixpath.join(rel, entry.name)
            st = entry.stat(follow_symlinks=False)
            opaque = redirected = False
            if stat.S_ISDIR(st.st_mode):
                opaque = _xattr(entry.path, "trusted.overlay.opaque") == b"y"
                redirected = _xattr(entry.path, "trusted.overlay.redirect") is not None
                if not redirected:
                    subdirs.append(path)
            yield path, st, opaque, redirected
        stack.extend(reversed(subdirs))


def _host_entry(path: str, st: os.stat_result, opaque: bool, redirected: bool, tree: SafeTree,
                policy: SealPolicy, pristine: Callable[[str], bool], carry: Carry, writer: _Writer) -> None:
    if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:  # a whiteout: the agent deleted the path
        _delete(path, policy, carry)
        return
    is_dir = stat.S_ISDIR(st.st_mode)
    why = policy.deny_reason(path, is_dir=is_dir)
    if why:
        carry.skip(why, path)
        return
    if is_dir:
        if (opaque or redirected) and not policy.contains_protected(path):
            carry.deletions.append(path)
        if not policy.contains_protected(path):
            merged = tree.lstat(path)
            if merged is not None and stat.S_ISDIR(merged.st_mode):
                writer.directory(path, merged.st_mode, merged.st_uid, merged.st_gid, merged.st_mtime)
        if redirected:
            _host_subtree(path, tree, policy, carry, writer)
        return
    if policy.in_bin_dir(path) and pristine(path):
        carry.skip(policy.MODIFIED_TOOL, path)
        return
    if policy.contains_protected(path):  # a file or link in place of a directory that holds protected paths
        carry.skip(f"{path} contains protected paths", path)
        return
    _host_file(path, tree, carry, writer, policy)


def dir_link_allowed(target: str, policy: SealPolicy) -> bool:
    """Whether a symlink to the directory ``target`` (resolved) may be carried as a link: the target
    is data the agent may change, not scratch space the tests write to, nor an ancestor of what
    the seal protects (the verifier never reads or writes through it into protected paths)."""
    return (target != "/" and policy.deny_reason(target, is_dir=True) is None
            and not policy.contains_protected(target)
            and not any(target == d or target.startswith(d + "/") for d in SCRATCH_DIRS))


def _host_file(path: str, tree: SafeTree, carry: Carry, writer: _Writer, policy: SealPolicy) -> None:
    """A regular file, a copy of the regular file a symlink resolves to, or a symlink to a data
    directory (``/app/current -> releases/v2``); anything else is dropped."""
    source = path
    st = tree.lstat(path)
    if st is not None and stat.S_ISLNK(st.st_mode):
        source = tree.resolve(path) or ""
        target = tree.lstat(source) if source else None
        if target is not None and stat.S_ISDIR(target.st_mode) and dir_link_allowed(source, policy):
            writer.symlink(path, tree.readlink(path) or source, st.st_uid, st.st_gid, st.st_mtime)
            return
    opened = tree.open_regular(source) if source else None
    if opened is None:
        carry.skip("links to directories outside the data, dangling links and special files", path)
        return
    handle, fst = opened
    with handle:
        writer.file(path, handle, fst.st_size, fst.st_mode, fst.st_uid, fst.st_gid, fst.st_mtime)


def _host_subtree(root: str, tree: SafeTree, policy: SealPolicy, carry: Carry, writer: _Writer) -> None:
    """Every entry below a renamed directory, read from the merged view."""
    stack = [root]
    while stack:
        current = stack.pop()
        try:
            fd, name = tree._parent_fd(current)
        except OSError:
            continue
        try:
            dfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        except OSError:
            continue
        finally:
            os.close(fd)
        try:
            names = sorted(os.listdir(dfd))
        finally:
            os.close(dfd)
        for child in names:
            writer.look()
            path = posixpath.join(current, child)
            st = tree.lstat(path)
            if st is None:
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            why = policy.deny_reason(path, is_dir=is_dir)
            if why:
                carry.skip(why, path)
            elif is_dir:
                writer.directory(path, st.st_mode, st.st_uid, st.st_gid, st.st_mtime)
                stack.append(path)
            else:
                _host_file(path, tree, carry, writer, policy)


def _delete(path: str, policy: SealPolicy, carry: Carry) -> None:
    why = policy.deny_deletion(path)
    if why:
        carry.skip(why, path)
    else:
        carry.deletions.append(path)


DELETION_BATCH_BYTES = 96 << 10
"""Deletions per ``rm`` run, by the bytes of their paths (well inside the kernel's argument limit)."""


def _batches(paths: list[str], limit: int) -> Iterator[list[str]]:
    batch: list[str] = []
    size = 0
    for path in paths:
        if batch and size + len(path) + 1 > limit:
            yield batch
            batch, size = [], 0
        batch.append(path)
        size += len(path.encode("utf-8", "surrogateescape")) + 1
    if batch:
        yield batch


def apply_carry(verifier, carry: Carry) -> str | None:
    """Delete, then extract the archive in the verifier's container; an error message or None."""
    for batch in _batches(carry.deletions, DELETION_BATCH_BYTES):
        result = verifier.exec(["rm", "-rf", "--", *batch], 120, user="0")
        if result.exit_code != 0:
            return f"could not apply the agent's deletions: {result.output.strip()[:300]}"
    if carry.archive is not None:
        try:
            verifier.api.put_archive(verifier.id, "/", carry.archive)
        except docker.errors.APIError as exc:
            return f"could not write the agent's files into the verifier's container: {exc.explanation or exc}"
    return None


__all__ = ["Carry", "CarryError", "SafeTree", "apply_carry", "carry_from_host", "host_layer"]
