"""The account database the sealed verifier sees: the pristine image's, with the agent's changes that are data.

Tests that switch user (``su tester -c ...``, ``su - tester``, ``runuser``) run that user's login
shell from ``/etc/passwd`` and read tool settings from its home. So the carried ``/etc/passwd`` is
rebuilt from the pristine image's, line by line (:func:`merge_passwd`):

* an account the pristine image has keeps its user and group ids (they decide what a process may
  do) and its login shell, unless the agent's shell is a program of the pristine image out of the
  agent's reach (``/bin/zsh``, ``/usr/sbin/nologin``: a task may ask to change it); its home may
  move (the seal protects the tool directories of every home the merged database names), and its
  password and comment fields are the agent's;
* an account the agent added is kept when its shell is such a program, else left out;
* ``root`` cannot be deleted; other deletions are kept;
* lines that are not ``name:password:uid:gid:comment:home:shell`` with numeric ids, and NIS
  ``+``/``-`` lines, are left out; the first line of a name wins, as ``getpwnam`` reads it.
"""

from __future__ import annotations

from typing import Callable

PASSWD = "/etc/passwd"
MAX_BYTES = 4 << 20
"""A larger passwd file is carried as the pristine image's."""
NOT_DELETED = ("root",)


def parse_passwd(text: str) -> list[list[str]]:
    """The well-formed entries of a passwd file, in order (the first of a name only)."""
    out, seen = [], set()
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) != 7 or not fields[0] or fields[0][0] in "+-#" or not (fields[2].isdigit() and fields[3].isdigit()):
            continue
        if fields[0] in seen:
            continue
        seen.add(fields[0])
        out.append(fields)
    return out


def homes(text: str) -> tuple[str, ...]:
    """The absolute home directories a passwd file names."""
    return tuple(dict.fromkeys(f[5] for f in parse_passwd(text) if f[5].startswith("/")))


def merge_passwd(pristine: str, agent: str, safe_shell: Callable[[str], bool]) -> tuple[str, list[str]]:
    """The passwd file the verifier gets, and notes on each of the agent's changes left out.
    ``safe_shell``: whether a login shell is a program of the pristine image out of the agent's reach."""
    before = {f[0]: f for f in parse_passwd(pristine)}
    notes: list[str] = []
    out: list[list[str]] = []
    for fields in parse_passwd(agent):
        name, shell = fields[0], fields[6]
        old = before.get(name)
        if old is None:
            if shell and not safe_shell(shell):
                notes.append(f"account {name} added with the login shell {shell} (not a program of the image)")
                continue
            out.append(fields)
            continue
        merged = [name, fields[1], old[2], old[3], fields[4], fields[5], shell]
        if (fields[2], fields[3]) != (old[2], old[3]):
            notes.append(f"account {name}: ids {fields[2]}:{fields[3]} kept as {old[2]}:{old[3]}")
        if shell != old[6] and shell and not safe_shell(shell):
            merged[6] = old[6]
            notes.append(f"account {name}: login shell {shell} kept as {old[6]}")
        out.append(merged)
    kept = {f[0] for f in out}
    for name in NOT_DELETED:
        if name in before and name not in kept:
            out.insert(0, before[name])
            notes.append(f"account {name} cannot be deleted")
    return "".join(":".join(f) + "\n" for f in out), notes
