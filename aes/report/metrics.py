"""Metrics sinks: ``metrics.jsonl`` in the run dir (always) and wandb (``logger=wandb``).

wandb gets every row: one step per row, counted over the whole ``metrics.jsonl`` (rows of
every event — update, no_update, round, refresh, eval, sft_step — share that one monotonic
step, so none is dropped for logging to a step wandb has passed; a resumed run goes on counting
from its file). A row's own counters (``step``, ``update``, ``round``) stay ordinary metrics to
plot against; its wall-clock ``time`` is not sent (wandb keeps its own ``_timestamp``). Nested
dicts arrive as ``key/sub`` (``failures_by_stage/no_draft``), an empty one as ``key: null``.
The run carries the resolved config (``config.yaml`` of the run dir), multirun jobs are grouped
by their sweep dir, and ``close()`` uploads ``report.html`` as an artifact of type ``report``.

One row per thing counted: an update, a step without one, a round, a refresh or an evaluation
has one row (:func:`row_key`). A run resumed after a kill that struck between a row and the state
it describes does that step again; its new row replaces the earlier one in ``metrics.jsonl``
(wandb keeps both: its steps only go forward).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from pathlib import Path
from typing import Any

from aes.config import LoggerConfig
from aes.paths import RunPaths

log = logging.getLogger(__name__)

WANDB_GROUP_MAX = 128
"""wandb refuses longer group names."""


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class MetricsLogger:
    """Appends one JSON row per call to ``metrics.jsonl`` (flushed and fsynced: a crash keeps every row)."""

    def __init__(self, cfg: LoggerConfig, run_dir: Path, config: dict | None = None):
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.path = RunPaths(self.run_dir).metrics
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._wandb = None
        self._keys = {row_key(r) for r in read_metrics(self.path)} - {None}
        """Keys of the rows in metrics.jsonl (see :func:`row_key`)."""
        self._step = 0
        """wandb's step for the next row: rows already in metrics.jsonl (a resumed run continues)."""
        if cfg.name == "wandb":
            import wandb

            os.environ.setdefault("WANDB_MODE", cfg.mode)
            config = config if config is not None else resolved_config(self.run_dir)
            self._step = len(read_metrics(self.path))
            identity = wandb_identity(cfg, self.run_dir, config)
            self._wandb = wandb.init(project=cfg.project, dir=str(self.run_dir), config=config,
                                     resume="allow", id=_run_id(self.run_dir), **identity)
        elif cfg.name != "jsonl":
            raise ValueError(f"logger.name must be jsonl or wandb, got {cfg.name!r}")

    def log(self, row: dict[str, Any], step: int | None = None) -> None:
        """Append ``row`` (plus its wall-clock ``time``). ``step`` is the caller's counter; rows
        carry their own (``step``, ``update``), and wandb counts rows (see the module doc)."""
        row = {"time": time.time(), **{k: _clean(v) for k, v in row.items()}}
        key = row_key(row)
        if key is not None and key in self._keys:
            self._drop(key)
        self._keys.add(key)
        with open(self.path, "a") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        if self._wandb is not None:
            self._wandb.log(wandb_row(row), step=self._step)
        self._step += 1

    def rows(self) -> list[dict[str, Any]]:
        return read_metrics(self.path)

    def _drop(self, key: tuple) -> None:
        """Rewrite metrics.jsonl without the rows of ``key`` (atomically)."""
        kept = [r for r in read_metrics(self.path) if row_key(r) != key]
        log.info("metrics.jsonl: %s %s is logged again (a resumed run redid it); the new row replaces the old",
                 key[0], key[1])
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        with open(tmp, "w") as fh:
            fh.write("".join(json.dumps(r) + "\n" for r in kept))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def close(self) -> None:
        if self._wandb is None:
            return
        import wandb

        report = RunPaths(self.run_dir).report
        if report.is_file():
            artifact = wandb.Artifact(f"report-{self._wandb.id}", type="report",
                                      description=f"report.html of run dir {self.run_dir}")
            artifact.add_file(str(report), name="report.html")
            self._wandb.log_artifact(artifact)
        self._wandb.finish()
        self._wandb = None
        # finish() can return before wandb's core process has written the last records to the
        # run's .wandb file; teardown waits for it, so the file is whole for `wandb sync`.
        wandb.teardown()


def wandb_row(row: dict[str, Any]) -> dict[str, Any]:
    """What wandb gets of a metrics row: every key but ``time``, nested dicts as ``key/sub``."""
    out: dict[str, Any] = {}

    def put(key: str, value: Any) -> None:
        if isinstance(value, dict):
            if not value:
                out[key] = None
            for sub, inner in value.items():
                put(f"{key}/{sub}", inner)
        else:
            out[key] = value

    for key, value in row.items():
        if key != "time":
            put(key, value)
    return out


def resolved_config(run_dir: Path) -> dict:
    """The effective config the run wrote (``config.yaml``), as plain containers; {} without one."""
    path = RunPaths(Path(run_dir)).config
    if not path.is_file():
        return {}
    from omegaconf import OmegaConf

    try:
        return OmegaConf.to_container(OmegaConf.load(path), resolve=False) or {}  # type: ignore[return-value]
    except Exception as exc:  # noqa: BLE001 - a config we cannot read must not stop the run
        log.warning("wandb: could not read %s (%s); the run gets no config", path, exc)
        return {}


def _hydra() -> Any | None:
    try:
        from hydra.core.hydra_config import HydraConfig

        return HydraConfig.get() if HydraConfig.initialized() else None
    except Exception:  # noqa: BLE001 - no Hydra: no sweep to group by
        return None


def wandb_identity(cfg: LoggerConfig, run_dir: Path, config: dict | None = None, hydra: Any = None) -> dict:
    """``group``, ``name``, ``job_type`` and ``tags`` of the wandb run: the logger config's when
    set; else a multirun job is grouped by its sweep dir and named by its job number and overrides."""
    from hydra.types import RunMode

    hc = hydra if hydra is not None else _hydra()
    multirun = hc is not None and hc.mode == RunMode.MULTIRUN
    group, name, job_type = cfg.group, cfg.run_name, None
    if multirun:
        if group is None:
            sweep = Path(str(hc.sweep.dir))
            try:
                sweep = sweep.resolve().relative_to(Path.cwd().resolve())
            except ValueError:
                pass
            group = str(sweep)[-WANDB_GROUP_MAX:]
        if name is None:
            name = f"{hc.job.num}:{_swept_overrides(hc) or hc.job.override_dirname or 'defaults'}"
        job_type = hc.job.name
    if name is None:
        name = Path(run_dir).resolve().name
    config = config or {}
    tags = [f"mode={config['mode']}"] if config.get("mode") else []
    for section in ("proposer", "solver", "harness"):
        value = (config.get(section) or {}).get("name") if isinstance(config.get(section), dict) else None
        if value:
            tags.append(f"{section}={value}")
    tags += [t for t in cfg.tags if t not in tags]
    return {"group": group, "name": name, "job_type": job_type, "tags": [t[:64] for t in tags]}


SWEEP_FUNCTIONS = re.compile(r"^(range|choice|glob|interval|tag|sort|shuffle)\(")


def _swept_overrides(hc: Any) -> str:
    """This job's values of the keys its sweep varies (``harness=prompt,proposer=claude``): the keys of
    ``hydra.sweeper.params`` and those given with sweep syntax (``seed=0,1``, ``range(...)``) on the
    command line (the sweep's ``multirun.yaml``); '' when none can be told."""
    keys = set(getattr(getattr(hc, "sweeper", None), "params", None) or {})
    try:
        from omegaconf import OmegaConf

        task = OmegaConf.load(Path(str(hc.sweep.dir)) / "multirun.yaml").hydra.overrides.task
    except Exception:  # noqa: BLE001 - no multirun.yaml (e.g. another launcher): the sweeper's params only
        task = []
    for override in task:
        key, _, value = str(override).partition("=")
        if ("," in value and not value.startswith(("[", "{"))) or SWEEP_FUNCTIONS.match(value):
            keys.add(key.lstrip("+~"))
    job = [str(o) for o in getattr(getattr(hc, "overrides", None), "task", None) or []]
    return ",".join(o for o in job if o.partition("=")[0].lstrip("+~") in keys)


ROW_KEYS = {"update": "update", "no_update": "step", "round": "round", "refresh": "update", "eval": "update",
            "generate": None}
"""Event -> the counter that identifies its row (None: one row of that event per run dir)."""


def row_key(row: dict[str, Any]) -> tuple | None:
    """What a row counts, e.g. ``("round", 3)``; None for events with no such identity (sft steps)."""
    event = row.get("event")
    if event not in ROW_KEYS:
        return None
    counter = ROW_KEYS[event]
    return (event, row.get(counter) if counter else "")


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
