"""Aggregation of ``(timestamp, value)`` samples per window."""

from __future__ import annotations

from dataclasses import dataclass

from telemetry.windows import window_index


@dataclass(frozen=True)
class Window:
    index: int
    start: int
    end: int
    count: int
    total: float
    minimum: float
    maximum: float


def bucket(samples, width: int) -> list[Window]:
    """One :class:`Window` per window that holds at least one sample, ordered by start.

    ``samples`` is an iterable of ``(timestamp_ns, value)`` pairs in any order.
    """
    groups: dict[int, list[float]] = {}
    for ts, value in samples:
        groups.setdefault(window_index(ts, width), []).append(value)
    windows = []
    for index in sorted(groups):
        values = groups[index]
        start = int(index * float(width))
        windows.append(Window(index, start, start + width, len(values), sum(values), min(values), max(values)))
    return windows
