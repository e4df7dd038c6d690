"""The run dir: a fresh one per run, one writer at a time, and the way back into it.

- **Fresh dirs.** ``hydra.run.dir`` and ``hydra.sweep.dir`` default to ``outputs/DATE/TIME`` and
  ``multirun/DATE/TIME`` through ``${aes.fresh_dir:...}``: the first dir of that name that did
  not exist yet, claimed with an atomic ``mkdir`` (``TIME-2``, ``TIME-3``, ... for runs started in
  the same second, on this host or another one sharing the file system). Hydra caches the value,
  so every job of a sweep resolves the same dir.
- **One writer.** :func:`hold` takes an exclusive lock (``fcntl.flock``) on ``RUN_DIR/.lock`` for
  the life of the process and writes who holds it (pid, host, command, start time). A second run
  in the same dir stops before it writes anything, with one line naming the holder. The lock
  goes with the process: after Ctrl-C, a kill or a crash the dir is free again.
  :class:`RunDirCallback` takes it before Hydra writes ``.hydra/`` and ``run.log`` there.
- **Resume.** ``python -m aes.run resume=RUN_DIR`` runs RUN_DIR again with the config it was
  started with (its ``config.yaml``: the typed, effective values, whatever config dir, experiment
  or sweep produced them); values given beside ``resume=`` change it (``flywheel.rounds=4``,
  ``budget.max_usd=20``), group choices cannot. Finished rounds, episodes and attempts are not
  redone (see :mod:`aes.flywheel`).
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from aes.config import ConfigError
from aes.config.load import CONF_DIR
from aes.paths import RunPaths

LOCK = ".lock"
_held: dict[Path, int] = {}
"""Run dirs this process holds -> the lock file's descriptor (kept open: closing it unlocks)."""


class RunDirBusy(ConfigError):
    """Another process holds the run dir."""


# -- fresh dirs -------------------------------------------------------------------------------
def fresh_dir(pattern: str) -> str:
    """``pattern`` if no such dir exists yet, else ``pattern-2``, ``pattern-3``, ...; the dir is
    created here (``mkdir`` without ``exist_ok`` is the claim: two processes never get the same)."""
    base = Path(pattern)
    base.parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        candidate = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return str(candidate)
    raise ConfigError(f"no free run dir next to {pattern}: 10,000 of them exist; set hydra.run.dir=DIR")


def run_dir_of(resume: Any, pattern: str) -> str:
    """``hydra.run.dir``: the dir to resume (``resume=RUN_DIR``), else a fresh one."""
    return str(resume) if resume not in (None, "") else fresh_dir(pattern)


def register_resolvers() -> None:
    for name, function in (("aes.fresh_dir", fresh_dir), ("aes.run_dir", run_dir_of)):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, function, use_cache=True)


# -- one writer -------------------------------------------------------------------------------
def holder(run_dir: Path) -> dict:
    """Who holds (or last held) the run dir, as its lock file says ({} when unknown)."""
    try:
        data = json.loads((Path(run_dir) / LOCK).read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def describe_holder(info: dict) -> str:
    if not info:
        return "another process"
    return (f"pid {info.get('pid', '?')} on {info.get('host', '?')}, started {info.get('started', '?')}: "
            f"{info.get('command', '?')}")


def hold(run_dir: str | Path) -> Path:
    """Lock ``run_dir`` for this process (again: no-op); :class:`RunDirBusy` names the holder."""
    run_dir = Path(run_dir).resolve()
    if run_dir in _held:
        return run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RunDirBusy(f"{run_dir} is in use by another aes run ({describe_holder(holder(run_dir))}); wait for "
                         "it to end or stop it (Ctrl-C, or kill -INT with its pid), or choose another dir "
                         "(leave hydra.run.dir unset for a fresh one)") from None
    info = {"pid": os.getpid(), "host": socket.gethostname(), "command": command_line(),
            "started": dt.datetime.now().astimezone().isoformat(timespec="seconds")}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
    _held[run_dir] = fd
    return run_dir


def command_line() -> str:
    argv = list(sys.argv)
    if argv and argv[0].endswith(("aes/run.py", "aes/run")):
        argv[0] = "python -m aes.run"
    return " ".join(argv)


# -- resume -----------------------------------------------------------------------------------
def resume_hint(run_dir: Path) -> str:
    return f"python -m aes.run resume={Path(run_dir).resolve()}"


def check_resumable(run_dir: Path) -> None:
    if not Path(run_dir).is_dir():
        raise ConfigError(f"resume={run_dir}: no such directory; pass the run dir a run printed at its start")
    if not RunPaths(Path(run_dir)).config.is_file():
        raise ConfigError(f"resume={run_dir}: no config.yaml there, so it is not a run dir (a run writes "
                          "config.yaml when it starts); pass the run dir a run printed at its start")


def resume_config(run_dir: Path, overrides: list[str]) -> tuple[DictConfig, list[str]]:
    """The config to resume ``run_dir`` with: its ``config.yaml``, then the value ``overrides``
    given beside ``resume=`` (Hydra syntax). Returns it and those overrides, normalised
    (``key=value``), for the record."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    check_resumable(run_dir)
    saved = OmegaConf.load(RunPaths(Path(run_dir)).config)
    rest = [o for o in overrides if o.partition("=")[0].lstrip("+~") != "resume"]
    applied = []
    for override in OverridesParser.create().parse_overrides(rest):
        key = override.key_or_group
        current = OmegaConf.select(saved, key, default=None)
        group = (CONF_DIR / key).is_dir() or isinstance(current, DictConfig) or "/" in key
        if override.is_delete() or override.package or group:
            raise ConfigError(f"resume={run_dir} {override.input_line}: a resumed run keeps the groups and "
                              "experiment it was started with; only values can change on resume (e.g. "
                              "flywheel.rounds=4, budget.max_usd=20). Start a new run for other choices")
        if override.is_sweep_override():
            raise ConfigError(f"resume={run_dir} {override.input_line}: a resume is one run, not a sweep")
        value = override.value()
        with open_dict(saved):
            OmegaConf.update(saved, key, value, merge=False, force_add=override.is_add())
        applied.append(f"{key}={override.get_value_element_as_str()}")
    with open_dict(saved):
        saved.resume = None
        saved.run_dir = str(Path(run_dir).resolve())
    return saved, applied


def record_resume(run_dir: Path, applied: list[str]) -> None:
    """Keep the run's command line true: the values changed on resume replace those of
    ``.hydra/overrides.yaml`` (Hydra's record of how the run was started, which a resume leaves alone)."""
    path = Path(run_dir) / ".hydra" / "overrides.yaml"
    if not applied or not path.is_file():
        return
    keys = {a.partition("=")[0] for a in applied}
    before = [str(o) for o in (OmegaConf.load(path) or [])]
    kept = [o for o in before if o.partition("=")[0].lstrip("+~") not in keys]
    OmegaConf.save(OmegaConf.create(kept + applied), path)


# -- the Hydra callback -----------------------------------------------------------------------
def _refuse(message: str) -> None:
    """One line and exit status 2, before Hydra has set up logging."""
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(2)


class RunDirCallback(Callback):
    """Takes the run dir (or the sweep dir) before Hydra writes into it; on ``resume=`` leaves the
    run's own ``.hydra/`` (how it was started) in place."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        resume = config.get("resume")
        try:
            if resume:
                check_resumable(Path(str(resume)))
            hold(Path(str(config.get("run_dir") or config.hydra.run.dir)))
        except ConfigError as exc:
            _refuse(str(exc))
        if resume:
            with read_write(config.hydra):
                config.hydra.output_subdir = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.get("resume"):
            _refuse("resume= resumes one run; to resume a sweep run the same command with "
                    "hydra.sweep.dir=SWEEP_DIR (each job resumes in its own dir)")
        try:
            hold(Path(str(config.hydra.sweep.dir)))
        except ConfigError as exc:
            _refuse(str(exc))
