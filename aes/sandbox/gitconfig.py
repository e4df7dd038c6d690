"""A git repository's configuration, carried to the sealed verifier as data: rebuilt from git's own reading of it.

A repository the agent wrote is data the tests may inspect (``git log``, ``git diff``,
``git status``), but its ``config`` can name programs git runs while doing so: a clean/smudge
filter (run by ``git status`` and ``git diff``), an external diff or a textconv driver, a pager,
an editor, a signature program, a credential helper, a shell alias, an ``ext::`` transport, an
include of another file that could hold any of these.

So a carried repository configuration is never copied as written. :func:`parse` reads it the way
git's own parser does (sections and keys on one line, several sections on one line, the old
``[section.sub]`` spelling, quoting, escapes, continuation lines, comments, CRLF, a BOM), and
:func:`sanitize` writes what it read back in one canonical form — one key a line, every value
quoted and escaped — without the command-valued keys (:func:`_denied`). Whatever spelling the
agent chose, git then reads exactly the keys aes judged; a file git itself would refuse is
carried up to its first error. The verifier's environment also forces ``core.fsmonitor``,
``core.hooksPath`` and ``core.pager`` (:data:`aes.sandbox.verifier.HARDENED_ENV`).

Which files are repository configurations, in every layout git accepts (:func:`is_git_dir`): a
``config`` or ``config.worktree`` in a directory that holds ``HEAD`` (a file or a symlink: git
reads both), a ``commondir`` file (a linked worktree's git dir), or both ``objects`` and ``refs``
(a shared common directory, which has no ``HEAD`` of its own), or whose name ends in ``.git``.
A gitfile (``.git`` holding ``gitdir: PATH``) leads git to such a directory too.
"""

from __future__ import annotations

from typing import Callable

DENIED_SECTIONS = frozenset({
    "filter", "credential", "gpg", "pager", "include", "includeif", "difftool", "mergetool", "man", "web",
    "browser", "sendemail", "guitool", "instaweb", "uploadpack", "uploadarchive", "receive", "imap", "protocol",
    "url", "lfs",
})
"""Sections whose keys name programs, other files to read configuration from, URL rewrites
(``url.ext::sh -c x.insteadOf``), or git-lfs's transfer agents (``lfs.customtransfer.x.path``)."""

DENIED_KEY_ENDINGS = ("command", "cmd", "program", "editor", "pager", "helper", "askpass", "proxy", "hookspath",
                      "fsmonitor", "textconv", "driver", "external", "browser", "viewer", "worktree", "variant",
                      "uploadpack", "receivepack", "vcs", "showsignature", "difffilter")
"""Key names (any section) that run a program or redirect git to other files: ``core.sshCommand``,
``core.editor``, ``sequence.editor``, ``core.gitProxy``, ``diff.external``, ``diff.x.textconv``,
``merge.x.driver``, ``trailer.x.command``, ``core.worktree``, ``log.showSignature``, ..."""

SHELL_PREFIX = "!"
"""A value starting with ``!`` is a shell command (``alias.x = !sh``, ``submodule.x.update``)."""

_SPACE = " \t\n\r"


class _Source:
    def __init__(self, text: str):
        if text.startswith("\ufeff"):
            text = text[1:]
        self.text, self.pos, self.eof = text, 0, False

    def next(self) -> str:
        """git's get_next_char: CRLF as LF, end of file as a final LF."""
        if self.pos >= len(self.text):
            self.eof = True
            return "\n"
        c = self.text[self.pos]
        self.pos += 1
        if c == "\r" and self.pos < len(self.text) and self.text[self.pos] == "\n":
            self.pos += 1
            return "\n"
        return c

    def back(self) -> None:
        if not self.eof:
            self.pos -= 1


def _keychar(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "-")


def _section(src: _Source) -> tuple[str, str | None] | None:
    name = ""
    while True:
        c = src.next()
        if src.eof:
            return None
        if c == "]":
            break
        if c in _SPACE:
            return _extended(src, name)
        if not _keychar(c) and c != ".":
            return None
        name += c.lower()
    if not name:
        return None
    if "." in name:  # the old [section.sub] spelling: the subsection is lowercased too
        section, sub = name.split(".", 1)
        return section, sub
    return name, None


def _extended(src: _Source, name: str) -> tuple[str, str | None] | None:
    c = src.next()
    while c in " \t":
        c = src.next()
    if c != '"' or not name:
        return None
    sub = ""
    while True:
        c = src.next()
        if c == "\n":
            return None
        if c == '"':
            break
        if c == "\\":
            c = src.next()
            if c == "\n":
                return None
        sub += c
    if src.next() != "]":
        return None
    if "." in name:  # [section.more "sub"]: git reads section "section", subsection "more.sub"
        section, more = name.split(".", 1)
        return section, f"{more}.{sub}"
    return name, sub


def _value(src: _Source) -> str | None:
    quote = comment = False
    space = 0
    out: list[str] = []
    while True:
        c = src.next()
        if c == "\n":
            return None if quote else "".join(out)
        if comment:
            continue
        if c in _SPACE and not quote:
            if any(out):
                space += 1
            continue
        if not quote and c in ";#":
            comment = True
            continue
        out.append(" " * space)
        space = 0
        if c == "\\":
            c = src.next()
            if c == "\n":  # a continuation line (at the end of the file: the value ends)
                continue
            escaped = {"t": "\t", "b": "\b", "n": "\n", "\\": "\\", '"': '"'}.get(c)
            if escaped is None:
                return None
            out.append(escaped)
            continue
        if c == '"':
            quote = not quote
            continue
        out.append(c)


def parse(text: str) -> tuple[list[tuple[str, str | None, str, str | None]], str | None]:
    """(section, subsection, key, value) in the order git reads them (value None: a bare key, true),
    and the error where git would stop reading (None: the whole file is valid). Section and key
    names are lowercased as git compares them; subsections keep their case. A key before any
    section has the section "" (git reads it and no setting uses it)."""
    src = _Source(text)
    entries: list[tuple[str, str | None, str, str | None]] = []
    section: tuple[str, str | None] | None = None
    comment = False
    while True:
        c = src.next()
        if c == "\n":
            if src.eof:
                return entries, None
            comment = False
            continue
        if comment or c in _SPACE:
            continue
        if c in "#;":
            comment = True
            continue
        if c == "[":
            section = _section(src)
            if section is None:
                return entries, "bad section header"
            continue
        if not (c.isascii() and c.isalpha()):
            return entries, "bad config line"
        key = c.lower()
        while True:
            c = src.next()
            if src.eof or not _keychar(c):
                break
            key += c.lower()
        while c in " \t":
            c = src.next()
        value = None
        if c != "\n":
            if c != "=":
                return entries, f"bad key {key!r}"
            value = _value(src)
            if value is None:
                return entries, f"bad value of {key!r}"
        entries.append((section[0], section[1], key, value) if section else ("", None, key, value))
        if src.eof:
            return entries, None


def _denied(section: str, sub: str | None, key: str, value: str | None) -> bool:
    if section in DENIED_SECTIONS or key.endswith(DENIED_KEY_ENDINGS):
        return True
    text = value or ""
    return text.lstrip().startswith(SHELL_PREFIX) or "::" in text


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace(
        "\b", "\\b") + '"'


def sanitize(text: str) -> tuple[str, list[str]]:
    """``text`` (a git config file) as git reads it, written canonically without its command-valued
    keys, and the keys removed (a parse error is listed as ``(...)``)."""
    entries, error = parse(text)
    out: list[str] = []
    dropped: list[str] = []
    current: tuple[str, str | None] | None = None
    for section, sub, key, value in entries:
        name = f"{section}.{sub + '.' if sub is not None else ''}{key}"
        if not section or _denied(section, sub, key, value):
            dropped.append(name)
            continue
        if (section, sub) != current:
            current = (section, sub)
            out.append(f"[{section}]\n" if sub is None else f"[{section} {_quote(sub)}]\n")
        out.append(f"\t{key}\n" if value is None else f"\t{key} = {_quote(value)}\n")
    if error:
        dropped.append(f"({error}: the rest of the file)")
    return "".join(out), dropped


CONFIG_NAMES = ("config", "config.worktree")
"""What git reads as a repository's configuration in a git directory."""
REPOSITORY_MARKERS = ("HEAD", "commondir")
"""Entries that make a directory a git directory (``HEAD`` in any form, or a worktree's ``commondir``)."""


def is_git_dir(name: str, has: Callable[[str], bool]) -> bool:
    """Whether a directory named ``name`` is one git reads a configuration from; ``has(entry)``:
    whether it holds an entry of that name (of any type)."""
    return (name.lower().endswith(".git") or any(has(m) for m in REPOSITORY_MARKERS)
            or (has("objects") and has("refs")))
