"""How far a long phase is and how long it has left: ``3/12 done, ~4 min left``.

The estimate is the wall time per finished item so far times the items left, so it already
accounts for items that run side by side; it says nothing until the first item is done.
"""

from __future__ import annotations

import time


class Progress:
    def __init__(self, total: int):
        self.total = total
        self.done = 0
        self.started = time.monotonic()

    def step(self, n: int = 1) -> str:
        """Count ``n`` more items done; the progress line."""
        self.done += n
        return self.line()

    def line(self) -> str:
        text = f"{self.done}/{self.total} done"
        left = self.total - self.done
        if self.done and left > 0:
            text += f", ~{remaining(left * (time.monotonic() - self.started) / self.done)} left"
        return text


def remaining(seconds: float) -> str:
    """``40 s``, ``4 min``, ``1.5 h`` (rounded up: an estimate should not promise too little)."""
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"{-(-seconds // 60):.0f} min"
    return f"{seconds / 3600:.1f} h"
