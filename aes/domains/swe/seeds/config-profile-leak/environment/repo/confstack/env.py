"""Environment overrides: ``<PREFIX>DB__POOL__MAX=9`` becomes ``{"db": {"pool": {"max": 9}}}``."""

from __future__ import annotations

from collections.abc import Mapping

_TRUE = ("true", "yes", "on")
_FALSE = ("false", "no", "off")


def parse_value(text: str):
    """An environment value as a config value: a boolean word, an integer, or the text itself."""
    if not isinstance(text, str):
        raise TypeError(f"environment values are strings, not {type(text).__name__}")
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    try:
        return int(word)
    except ValueError:
        return text


def parse_env(environ: Mapping[str, str], prefix: str) -> dict:
    """The overrides in ``environ``: every variable named ``prefix`` + a path of keys joined by
    ``__`` (lowercased). Other variables are ignored. A malformed name (an empty key) or a path
    that is both a value and a section raises ``ValueError``."""
    tree: dict = {}
    for name in sorted(environ):
        if not name.startswith(prefix):
            continue
        path = name[len(prefix):].lower().split("__")
        if not all(path):
            raise ValueError(f"malformed override {name!r}: keys are joined by exactly two underscores")
        node = tree
        for key in path[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise ValueError(f"override {name!r}: {key!r} is both a value and a section")
        if isinstance(node.get(path[-1]), dict):
            raise ValueError(f"override {name!r}: {path[-1]!r} is both a value and a section")
        node[path[-1]] = parse_value(environ[name])
    return tree
