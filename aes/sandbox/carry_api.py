"""Carry the agent's file changes through the engine's API: ``docker diff`` and archive downloads.

For remote or rootless engines, other storage drivers, and a container the freezer could not
stop (its merged view is unmounted). Same policy, same archive and the same bounds as the
host-side reader of :mod:`aes.sandbox.carry`.
"""

from __future__ import annotations

import base64
import json
import posixpath
import tarfile
import tempfile
from typing import BinaryIO, Callable

import docker.errors

from aes.sandbox import gitconfig
from aes.sandbox.carry import (
    _MAX_HOPS,
    DEFAULT_MAX_SECONDS,
    SPOOL_BYTES,
    Carry,
    CarryError,
    _delete,
    _Writer,
    dir_link_allowed,
)
from aes.sandbox.seal import SealPolicy


def carry_from_api(container, policy: SealPolicy, pristine: Callable[[str], object],
                   max_entries: int, max_bytes: int, scratch_owner: tuple[int, int] | None = None,
                   transforms: dict[str, Callable[[bytes], bytes]] | None = None,
                   max_seconds: float = DEFAULT_MAX_SECONDS) -> Carry:
    """The carry of a paused or stopped container through ``docker diff`` and archive downloads
    (``pristine``: the engine's stat of a path in the pristine image, None where it has none)."""
    api, cid = container.api, container.id
    carry = Carry(method="engine API")
    writer = _Writer(max_entries, max_bytes, carry,
                     lambda d: gitconfig.is_git_dir(posixpath.basename(d), lambda e: container.stat(f"{d}/{e}") is not None),
                     scratch_owner, transforms, max_seconds)
    changes = sorted(api.diff(cid) or [], key=lambda c: c["Path"])
    if len(changes) > max_entries:
        raise CarryError(f"the agent changed more than {max_entries} paths (sandbox.max_carry_entries)")
    writer.in_time()
    done: set[str] = set()
    """Paths fetched as a whole or blocked: their descendants are not looked at again."""
    try:
        for change in changes:
            path, kind = change["Path"], change["Kind"]
            writer.in_time()
            if _below(path, done):
                continue
            if kind == 2:
                _delete(path, policy, carry)
                continue
            head = container.stat(path)
            if head is None:
                continue
            is_dir = bool(head["mode"] & (1 << 31))
            why = policy.deny_reason(path, is_dir=is_dir)
            if why:
                carry.skip(why, path)
                continue
            if is_dir and kind == 0:
                # an existing directory: its changed children are listed on their own. Where the
                # image has a symlink the agent replaced with a directory, the link goes first, so
                # no child is written through it into what the link points to.
                before = pristine(path)
                if isinstance(before, dict) and before.get("linkTarget"):
                    why = policy.deny_deletion(path)
                    if why:
                        carry.skip(why, path)
                        done.add(path)
                    else:
                        carry.deletions.append(path)
                        writer.directory(path, head["mode"] & 0o777, 0, 0, 0)
                continue
            if not is_dir and kind == 0 and policy.in_bin_dir(path):
                carry.skip(policy.MODIFIED_TOOL, path)
                continue
            _api_fetch(api, cid, path, policy, carry, writer)
            done.add(path)
        writer.check_deletions(carry)
    except BaseException:
        writer.tar.close()
        writer.buf.close()
        raise
    return writer.finish(carry)


def _below(path: str, roots: set[str]) -> bool:
    """Whether ``path`` lies below one of ``roots`` (its ancestors looked up, not the roots scanned)."""
    parent = posixpath.dirname(path)
    while parent not in ("/", ""):
        if parent in roots:
            return True
        parent = posixpath.dirname(parent)
    return False


def _download(api, cid: str, path: str, max_bytes: int) -> BinaryIO | None:
    try:
        stream, _ = api.get_archive(cid, path)
    except docker.errors.NotFound:
        return None
    buf = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
    for chunk in stream:
        buf.write(chunk)
        if buf.tell() > max_bytes + (1 << 20):
            buf.close()
            raise CarryError(f"the agent's changes exceed {max_bytes >> 20} MiB (the task's storage limit)")
    buf.seek(0)
    return buf


def _api_fetch(api, cid: str, path: str, policy: SealPolicy, carry: Carry, writer: _Writer) -> None:
    parent = posixpath.dirname(path)
    archive = _download(api, cid, path, writer.max_bytes)
    if archive is None:
        return
    with archive, tarfile.open(fileobj=archive) as tar:
        for member in tar:
            writer.look()
            target = posixpath.normpath(posixpath.join(parent, member.name))
            if not target.startswith(path):
                continue
            why = policy.deny_reason(target, is_dir=member.isdir())
            if why:
                carry.skip(why, target)
            elif member.isdir():
                writer.directory(target, member.mode, member.uid, member.gid, member.mtime)
            elif member.isfile() or member.islnk():
                handle = tar.extractfile(member)
                if handle is not None:
                    writer.file(target, handle, member.size if member.isfile() else _size(tar, member),
                                member.mode, member.uid, member.gid, member.mtime)
            elif member.issym():
                _api_symlink(api, cid, target, member, carry, writer, policy)
            else:
                carry.skip("links to directories outside the data, dangling links and special files", target)


def _size(tar: tarfile.TarFile, member: tarfile.TarInfo) -> int:
    linked = tar._find_link_target(member)  # the regular member a hard link points to
    return linked.size


def _engine_stat(api, cid: str, path: str) -> dict | None:
    """The engine's stat of ``path`` in the container (it resolves symlinks on the way)."""
    response = api.head(api._url("/containers/{0}/archive", cid), params={"path": path})
    header = response.headers.get("X-Docker-Container-Path-Stat") if response.status_code == 200 else None
    return json.loads(base64.b64decode(header)) if header else None


def _api_symlink(api, cid: str, path: str, member: tarfile.TarInfo, carry: Carry, writer: _Writer,
                 policy: SealPolicy) -> None:
    """Carry a copy of the regular file a symlink leads to, or the link itself where it leads to a
    data directory (the engine resolves the parents)."""
    link, current = member.linkname, path
    for _ in range(_MAX_HOPS):
        current = posixpath.normpath(link if link.startswith("/") else posixpath.join(posixpath.dirname(current), link))
        head = _engine_stat(api, cid, current)
        if head is not None and head.get("mode", 0) & (1 << 31) and not head.get("linkTarget"):
            if dir_link_allowed(current, policy):
                writer.symlink(path, member.linkname, member.uid, member.gid, member.mtime)
                return
            break
        archive = _download(api, cid, current, writer.max_bytes)
        if archive is None:
            break
        with archive, tarfile.open(fileobj=archive) as tar:
            first = tar.next()
            if first is None:
                break
            if first.issym():
                link = first.linkname
                continue
            if first.isfile():
                handle = tar.extractfile(first)
                if handle is not None:
                    writer.file(path, handle, first.size, first.mode, first.uid, first.gid, first.mtime)
                    return
            break
    carry.skip("links to directories outside the data, dangling links and special files", path)


__all__ = ["carry_from_api"]
