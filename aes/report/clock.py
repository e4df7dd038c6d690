"""Wall seconds per stage of a round (rollouts, proposer, admission, calibration, update, ...).

One :class:`StageClock` per run; each stage's time is added up until the round's row takes it
(``seconds/<stage>`` in metrics.jsonl, printed by ``benchmarks/round.py``). Stages may nest
(admission runs inside a proposer episode) and may run in several threads at once, so the
figures are per stage, not a partition of the round's wall time.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Iterator


class StageClock:
    def __init__(self) -> None:
        self._totals: dict[str, float] = defaultdict(float)
        self._lock = threading.Lock()

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            with self._lock:
                self._totals[stage] += time.monotonic() - start

    def take(self) -> dict[str, float]:
        """The seconds per stage since the last take, as metrics (``seconds/<stage>``)."""
        with self._lock:
            out = {f"seconds/{k}": round(v, 2) for k, v in self._totals.items()}
            self._totals.clear()
        return out


NO_CLOCK = StageClock()
"""A clock nobody reads (components built without a run's clock)."""
