"""What a run has spent on model calls, kept in the run dir so that a resume starts from it.

``RUN_DIR/spend.json`` holds the run's totals (USD, tokens, model calls) over every session of
the run, rewritten atomically after each call: a resumed run (after Ctrl-C, a kill, a crash)
counts from there, so ``budget.max_usd`` and ``budget.max_tokens`` bound the whole run, and the
round rows' ``tokens`` and ``cost_usd`` (the run's totals so far) include the interrupted
session's calls. The file is written by the process that holds the run dir's lock
(:mod:`aes.rundir`), so nothing else writes it meanwhile.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from aes import interrupt
from aes.config import BudgetConfig, ConfigError
from aes.models import RunBudget
from aes.models.base import ChatResult

log = logging.getLogger("aes")


class RecordedBudget(RunBudget):
    """The run's :class:`~aes.models.RunBudget`, restored from and written to ``path``. Its check,
    which every model call makes first, also ends the call when a stop was requested
    (:mod:`aes.interrupt`)."""

    def __init__(self, cfg: BudgetConfig | None, path: Path):
        super().__init__(cfg)
        self.path = Path(path)
        before = read_spend(self.path)
        self.usd, self.tokens, self.calls = before["cost_usd"], before["tokens"], before["model_calls"]
        self.before = dict(before)
        """What earlier sessions of the run had spent when this one started."""
        if not self.path.is_file():
            self._write()  # a run that makes no model call says so too
        if before["model_calls"]:
            log.info("model calls of this run so far: %d, %d tokens, $%.4f (resumed from %s)", before["model_calls"],
                     before["tokens"], before["cost_usd"], self.path)

    def check(self) -> None:
        interrupt.check()
        super().check()

    def charge(self, result: ChatResult) -> None:
        with self._lock:
            self.usd += result.cost_usd
            self.tokens += result.usage.total
            self.calls += 1
            self._write()

    def session(self) -> dict[str, float]:
        """What this session (process) spent."""
        now = self.summary()
        return {k: now[k] - self.before[k] for k in now}

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps({"cost_usd": self.usd, "tokens": self.tokens, "model_calls": self.calls}) + "\n")
        os.replace(tmp, self.path)


def read_spend(path: Path) -> dict[str, float]:
    """The totals in ``path`` (zeros when there is none yet)."""
    zero = {"cost_usd": 0.0, "tokens": 0, "model_calls": 0}
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return zero
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} cannot be read ({exc}); it holds what the run has spent on model calls: "
                           "restore it or delete it to count from 0") from None
    return {"cost_usd": float(data.get("cost_usd", 0.0)), "tokens": int(data.get("tokens", 0)),
            "model_calls": int(data.get("model_calls", 0))}
