"""A git repository's configuration, carried to the sealed verifier without the keys that run programs.

A repository the agent wrote is data the tests may inspect (``git log``, ``git diff``,
``git status``), but its ``config`` can name programs git runs while doing so: a clean/smudge
filter (run by ``git status`` and ``git diff``), an external diff or a textconv driver, a pager,
an editor, a signature program, a credential helper, a shell alias, an ``ext::`` transport, an
include of another file that could hold any of these. The verifier's environment already forces
``core.fsmonitor``, ``core.hooksPath`` and ``core.pager`` (:data:`aes.sandbox.verifier.HARDENED_ENV`);
this module removes every command-valued key from a carried repository configuration, so
whatever git command the tests run, it runs no program the agent chose. Everything else (user,
remotes, branches, ordinary aliases, core settings) is kept as written.
"""

from __future__ import annotations

import re

DENIED_SECTIONS = frozenset({
    "filter", "credential", "gpg", "pager", "include", "includeif", "difftool", "mergetool", "man", "web",
    "browser", "sendemail", "guitool", "instaweb", "uploadpack", "receive", "imap", "protocol",
})
"""Sections whose keys name programs (or other files to read configuration from)."""

DENIED_KEYS = frozenset({
    "core.fsmonitor", "core.hookspath", "core.pager", "core.editor", "core.sshcommand", "core.askpass",
    "core.gitproxy", "core.alternaterefscommand", "core.worktree", "sequence.editor", "interactive.difffilter",
    "diff.external", "diff.tool", "merge.tool", "log.showsignature", "ssh.variant",
})
"""``section.key`` names (no subsection) that run a program or redirect git to other files."""

DENIED_SUBSECTION_KEYS = {
    "diff": frozenset({"textconv", "command"}),
    "merge": frozenset({"driver"}),
    "remote": frozenset({"uploadpack", "receivepack", "vcs", "proxycommand"}),
    "trailer": frozenset({"command", "cmd"}),
    "tar": frozenset({"command"}),
}
"""Keys of ``[section "name"]`` that run a program."""

SHELL_VALUED = frozenset({"alias", "submodule"})
"""Sections where a value starting with ``!`` is a shell command (``alias.x = !sh``, ``submodule.x.update``)."""

_HEADER = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]')
_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=(.*))?$", re.S)


def _continues(line: str) -> bool:
    """A value line ending with an unescaped backslash goes on on the next line."""
    body = line.rstrip("\r\n")
    return (len(body) - len(body.rstrip("\\"))) % 2 == 1


def _denied(section: str, sub: str | None, key: str, value: str) -> bool:
    section, key = section.lower(), key.lower()
    if "." in section and sub is None:  # the old [section.sub] spelling
        section, sub = section.split(".", 1)
    if section in DENIED_SECTIONS:
        return True
    if sub is None and f"{section}.{key}" in DENIED_KEYS:
        return True
    if sub is not None and key in DENIED_SUBSECTION_KEYS.get(section, ()):
        return True
    if section in SHELL_VALUED and value.strip().lstrip('"').lstrip().startswith("!"):
        return True
    return "ext::" in value.lower()


def sanitize(text: str) -> tuple[str, list[str]]:
    """``text`` (a git config file) without its command-valued keys, and the keys removed."""
    out: list[str] = []
    dropped: list[str] = []
    section, sub = "", None
    skipping = False
    for line in text.splitlines(keepends=True):
        if skipping:  # a continuation line of a removed value
            skipping = _continues(line)
            continue
        header = _HEADER.match(line)
        if header:
            section, sub = header.group(1), header.group(2)
            rest = line[header.end():]
            if not rest.strip() or rest.lstrip().startswith(("#", ";")):
                out.append(line)
                continue
            out.append(line[:header.end()] + "\n")  # a key on the header's line: judged on its own
            line = rest
        key = _KEY.match(line)
        if key and section and _denied(section, sub, key.group(1), key.group(2) or ""):
            dropped.append(f"{section}.{sub + '.' if sub else ''}{key.group(1)}")
            skipping = _continues(line)
            continue
        out.append(line)
    return "".join(out), dropped


def is_repository_config(name: str, in_repository: bool) -> bool:
    """Whether a file named ``name`` in a directory that is (``in_repository``: holds ``HEAD`` or
    is named ``*.git``) a git directory is that repository's configuration."""
    return in_repository and name in ("config", "config.worktree")
