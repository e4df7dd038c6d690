"""A clean stop on Ctrl-C or SIGTERM: the work in progress ends within seconds, unscored, and a
resume redoes it; what finished is kept.

The first SIGINT or SIGTERM only sets a flag and logs one line. The run stops where it is safe:

- every model call starts with the run budget's check (:class:`aes.spend.RecordedBudget`), which
  raises :class:`Interrupted` once a stop is requested, so a proposer episode or a solver attempt
  ends at its next model call;
- no new trial starts (:class:`StopBeforeTrial` wraps the run's trial runner);
- the flywheel checks between its stages (:func:`check`).

:class:`Interrupted` is an :class:`~aes.errors.InfrastructureError`: a proposer episode it cuts
short gets no outcome (its partial trajectory goes to ``infrastructure_failures/``, the assignment
stays open) and a solver attempt it cuts short is kept aside and never scored, exactly as when a
model server goes away. A second signal stops the process at once (as a kill would: the run dir
stays consistent, containers are reaped later).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

from aes.errors import InfrastructureError

log = logging.getLogger("aes")

_requested = threading.Event()
_signal: int | None = None
_hint = ""


class Interrupted(InfrastructureError):
    """A stop was requested (Ctrl-C, SIGTERM); the work in progress ends here, unscored."""


def requested() -> bool:
    return _requested.is_set()


def signal_name() -> str:
    return {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}.get(_signal, "a stop request")


def exit_status() -> int:
    """The shell's convention for a process ended by a signal: 128 + its number (130 for Ctrl-C)."""
    return 128 + int(_signal or signal.SIGINT)


def check() -> None:
    """Raise :class:`Interrupted` once a stop was requested."""
    if _requested.is_set():
        raise Interrupted(f"stopped by {signal_name()}")


def request(signum: int = signal.SIGINT) -> None:
    """Ask the run to stop (what the first signal does)."""
    global _signal
    if _signal is None:
        _signal = signum
    _requested.set()


def reset() -> None:
    """Forget a stop request (a new run in the same process, e.g. a test)."""
    global _signal
    _signal = None
    _requested.clear()


def _handler(signum: int, frame) -> None:  # noqa: ARG001 - signal handler signature
    if _requested.is_set():
        sys.stderr.write(f"\nstopping at once ({signal.Signals(signum).name}, a second time); {_hint}\n")
        sys.stderr.flush()
        os._exit(128 + signum)
    request(signum)
    log.warning("%s: stopping; the proposer episodes and solver attempts in progress end at their next model "
                "call, unscored, and a resume redoes them (again to stop at once)", signal_name())


@contextmanager
def handling(hint: str) -> Iterator[None]:
    """SIGINT and SIGTERM request a clean stop while the block runs; ``hint`` (how to resume) is
    printed if a second signal ends the process at once. Outside the main thread: nothing."""
    global _hint
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    reset()
    _hint = hint
    previous = {s: signal.signal(s, _handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class StopBeforeTrial:
    """A trial runner that starts no new trial once a stop was requested (everything else is the
    wrapped runner's)."""

    def __init__(self, trials):
        self.trials = trials

    def run(self, *args, **kwargs):
        check()
        return self.trials.run(*args, **kwargs)

    def __getattr__(self, name: str):
        if name == "trials":  # not set yet (e.g. while unpickling)
            raise AttributeError(name)
        return getattr(self.trials, name)
