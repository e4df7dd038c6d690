"""Window arithmetic.

A window of width ``width`` (integer nanoseconds, > 0) with index ``k`` covers the
half-open interval ``[k * width, (k + 1) * width)``. Every integer timestamp ``ts``
belongs to exactly one window: the one with index ``floor(ts / width)``.
"""

from __future__ import annotations


def _validate(ts: int, width: int) -> None:
    if isinstance(ts, bool) or not isinstance(ts, int):
        raise TypeError(f"timestamp must be an int of nanoseconds, got {type(ts).__name__}")
    if isinstance(width, bool) or not isinstance(width, int):
        raise TypeError(f"width must be an int of nanoseconds, got {type(width).__name__}")
    if width <= 0:
        raise ValueError(f"width must be positive, got {width}")


def window_index(ts: int, width: int) -> int:
    """Index of the window that holds ``ts``."""
    _validate(ts, width)
    return int(ts / width)


def window_start(ts: int, width: int) -> int:
    """First nanosecond of the window that holds ``ts``."""
    return window_index(ts, width) * width


def window_bounds(ts: int, width: int) -> tuple[int, int]:
    """``(start, end)`` of the window that holds ``ts``: ``start <= ts < end``."""
    start = window_start(ts, width)
    return start, start + width


def windows_between(first_ts: int, last_ts: int, width: int) -> list[int]:
    """Indices of every window from the one holding ``first_ts`` to the one holding
    ``last_ts`` (inclusive), in order; empty when ``last_ts < first_ts``."""
    _validate(last_ts, width)
    if last_ts < first_ts:
        return []
    return list(range(window_index(first_ts, width), window_index(last_ts, width) + 1))
