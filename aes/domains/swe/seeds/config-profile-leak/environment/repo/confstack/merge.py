"""Merging configuration layers: later layers win, dictionaries merge key by key."""

from __future__ import annotations


def deep_merge(base: dict, *layers: dict) -> dict:
    """``base`` with each of ``layers`` merged on top, in order.

    Where both sides hold a dict, they merge key by key (recursively); any other value of a
    later layer (a scalar, a list, None, or a dict over a non-dict) replaces the earlier one.
    Keys must be strings.
    """
    for layer in (base, *layers):
        if not isinstance(layer, dict):
            raise TypeError(f"a configuration layer must be a dict, not {type(layer).__name__}")
    result = dict(base)
    for layer in layers:
        _merge_into(result, layer)
    return result


def _merge_into(target: dict, layer: dict) -> None:
    for key, value in layer.items():
        if not isinstance(key, str):
            raise TypeError(f"configuration keys must be strings, not {key!r}")
        current = target.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            _merge_into(current, value)
        else:
            target[key] = value
