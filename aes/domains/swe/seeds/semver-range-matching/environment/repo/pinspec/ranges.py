"""Specifiers: comma-separated clauses that a version must all satisfy (see README.md)."""

from __future__ import annotations

import re

from pinspec.version import compare, parse_version

_CLAUSE = re.compile(r"(\^|~|>=|<=|==|>|<)?\s*(\S+)")


def _bounds(op: str, text: str) -> list[tuple[str, str]]:
    """The clause as plain comparisons ``(operator, version)``."""
    major, minor, patch = parse_version(text)
    if op == "^":
        return [(">=", text), ("<", f"{major + 1}.0.0")]
    if op == "~":
        return [(">=", text), ("<", f"{major}.{minor + 1}.0")]
    return [(op or "==", text)]


def _clauses(spec: str) -> list[tuple[str, str]]:
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"empty specifier: {spec!r}")
    out = []
    for part in spec.split(","):
        match = _CLAUSE.fullmatch(part.strip())
        if not match:
            raise ValueError(f"malformed clause {part!r} in {spec!r}")
        out += _bounds(match.group(1) or "", match.group(2))
    return out


_TESTS = {
    "==": lambda c: c == 0, ">=": lambda c: c >= 0, "<=": lambda c: c <= 0,
    ">": lambda c: c > 0, "<": lambda c: c < 0,
}


def satisfies(version: str, spec: str) -> bool:
    """Whether ``version`` satisfies every clause of ``spec``."""
    parse_version(version)
    return all(_TESTS[op](compare(version, bound)) for op, bound in _clauses(spec))


def max_satisfying(versions, spec: str) -> str | None:
    """The highest of ``versions`` that satisfies ``spec`` (as given), or None."""
    clauses = _clauses(spec)
    best = None
    for version in sorted(versions):
        parse_version(version)
        if all(_TESTS[op](compare(version, bound)) for op, bound in clauses):
            best = version
    return best
