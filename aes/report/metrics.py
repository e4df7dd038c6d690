"""Metrics sinks: ``metrics.jsonl`` in the run dir (always) and wandb (``logger=wandb``)."""

from __future__ import annotations

import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any

from aes.config import LoggerConfig
from aes.paths import RunPaths

log = logging.getLogger(__name__)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class MetricsLogger:
    """Appends one JSON row per call to ``metrics.jsonl`` (flushed and fsynced: a crash keeps every row)."""

    def __init__(self, cfg: LoggerConfig, run_dir: Path, config: dict | None = None):
        self.cfg = cfg
        self.path = RunPaths(Path(run_dir)).metrics
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._wandb = None
        if cfg.name == "wandb":
            import wandb

            os.environ.setdefault("WANDB_MODE", cfg.mode)
            self._wandb = wandb.init(project=cfg.project, dir=str(run_dir), config=config or {},
                                     resume="allow", id=_run_id(run_dir))
        elif cfg.name != "jsonl":
            raise ValueError(f"logger.name must be jsonl or wandb, got {cfg.name!r}")

    def log(self, row: dict[str, Any], step: int | None = None) -> None:
        row = {"time": time.time(), **{k: _clean(v) for k, v in row.items()}}
        with open(self.path, "a") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        if self._wandb is not None:
            self._wandb.log({k: v for k, v in row.items() if isinstance(v, (int, float))}, step=step)

    def rows(self) -> list[dict[str, Any]]:
        return read_metrics(self.path)

    def close(self) -> None:
        if self._wandb is not None:
            self._wandb.finish()


def read_metrics(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:  # a torn last line of a killed run
            continue
    return rows


def _run_id(run_dir: Path) -> str:
    return "aes-" + "".join(c if c.isalnum() else "-" for c in str(Path(run_dir).resolve()))[-60:]
