"""Versions ``MAJOR.MINOR.PATCH`` and their order."""

from __future__ import annotations

import re

_VERSION = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")


def parse_version(text: str) -> tuple[int, int, int]:
    """``(major, minor, patch)`` of ``text``; ``ValueError`` when it is not a version."""
    if not isinstance(text, str):
        raise TypeError(f"a version is a string, got {type(text).__name__}")
    match = _VERSION.fullmatch(text.strip())
    if not match:
        raise ValueError(f"not a MAJOR.MINOR.PATCH version: {text!r}")
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as version ``a`` is lower than, equal to or higher than ``b``."""
    parse_version(a), parse_version(b)
    left, right = a.strip().split("."), b.strip().split(".")
    return (left > right) - (left < right)
