"""A gate between model calls and a change of the weights behind them.

Calls pass while no swap runs; a swap (a llama.cpp engine loading new weights, a server group
restarting on a new GGUF) waits for the calls in flight and holds new ones until it is done, so
no call mixes two versions of the weights or meets a server that is restarting.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class WeightGate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._calls = 0
        self._swapping = False

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        with self._cond:
            while self._swapping:
                self._cond.wait()
            self._calls += 1
        try:
            yield
        finally:
            with self._cond:
                self._calls -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def swap(self) -> Iterator[None]:
        with self._cond:
            while self._swapping:
                self._cond.wait()
            self._swapping = True
            while self._calls:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._swapping = False
                self._cond.notify_all()
