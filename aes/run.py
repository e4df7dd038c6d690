"""Hydra entry point: ``python -m aes.run [mode=...] [group=option ...]``.

Composes ``conf/``, checks it against the typed schema, and dispatches the mode.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import hydra
import requests.exceptions
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from aes import interrupt
from aes.config import AesConfig, ConfigError, load_config, register_schema
from aes.errors import InfrastructureError
from aes.modes import check_arguments
from aes.paths import RunPaths
from aes.rundir import hold, record_resume, register_resolvers, resume_config, resume_hint
from aes.report.sizes import describe_sizes
from aes.sandbox.docker_backend import SandboxError
from aes.sandbox.docker_client import SandboxUnavailable
from aes.sandbox.engine import DiskFull, disk_full_message, is_disk_full
from aes.tasks import TaskLoadError

log = logging.getLogger("aes")


class RunFailed(RuntimeError):
    """The mode ran and reported failures (e.g. invalid tasks); the job must fail."""


def validate(cfg: AesConfig, run_dir: Path, tasks: str | None = None) -> bool:
    """Admission checks 1-4 on ``tasks`` (default: the domain's seed tasks)."""
    from aes.admission import validate_all
    from aes.compose import make_validator
    from aes.domains import seeds_dir
    from aes.modes import task_paths
    from aes.report.validation import print_reports, write_json

    key = "tasks" if (tasks or cfg.tasks) else "domain.seeds"
    source = tasks or cfg.tasks or str(seeds_dir(cfg.domain))
    paths = task_paths(source, key)
    log.info("validating %d task(s) from %s", len(paths), source)
    validator = make_validator(cfg, logs_dir=run_dir / "trials")
    reports = validate_all(validator, paths, cfg.sandbox.concurrency)
    print_reports(reports, title=validator.describe())
    write_json(reports, run_dir / "validation.json")
    bad = [r for r in reports if not r.valid]
    log.info("verdicts written to %s: %d of %d task(s) valid", run_dir / "validation.json", len(reports) - len(bad),
             len(reports))
    if bad:
        raise RunFailed(f"mode=validate: {len(bad)} of {len(reports)} task(s) failed admission checks 1-4 "
                        f"({', '.join(Path(str(r.task)).name for r in bad[:5])}{', ...' if len(bad) > 5 else ''}); "
                        f"the verdicts are above and in {run_dir / 'validation.json'}")
    return True


def run(cfg: AesConfig, run_dir: Path) -> bool:
    """The flywheel: rollouts -> assignments -> propose -> admit -> calibrate -> train -> refresh."""
    from aes.compose import build_flywheel
    from aes.flywheel import Flywheel
    from aes.modes import seed_tasks

    if not (RunPaths(run_dir).pool / "pool.sqlite").exists():
        seed_tasks(cfg)  # a seed that cannot be loaded stops the run before any model loads
    flywheel = Flywheel(build_flywheel(cfg, run_dir))
    try:
        flywheel.run()
    finally:
        flywheel.close()
    from aes.paths import size_line

    log.info("run dir %s", size_line(run_dir))  # its size, largest parts first (trainer.keep_checkpoints)
    log.info("report: %s", RunPaths(run_dir).report)
    return True


def dispatch(cfg: AesConfig, run_dir: Path) -> bool:
    from aes import modes

    table = {"run": run, "validate": validate, "rollout": modes.rollout,
             "calibrate": modes.calibrate, "eval": modes.evaluate, "generate": modes.generate,
             "train": modes.train, "sft": modes.sft}
    return table[cfg.mode](cfg, run_dir)


def _stop(message: str, status: int) -> None:
    """End the job with ``message`` instead of a traceback (multirun jobs still raise, so the
    launcher sees them fail)."""
    log.error("%s", message)
    if HydraConfig.get().mode == RunMode.MULTIRUN:
        raise RunFailed(message)
    raise SystemExit(status) from None


def _stopped(run_dir: Path | None) -> None:
    """After Ctrl-C or SIGTERM: one line on how to go on, and the signal's exit status (a sweep
    stops as a whole)."""
    where = f"; resume with: {resume_hint(run_dir)}" if run_dir is not None else ""
    log.warning("stopped by %s: everything finished so far is kept, the episodes and attempts in progress are "
                "redone on resume%s", interrupt.signal_name(), where)
    raise SystemExit(interrupt.exit_status()) from None


def _given_overrides() -> list[str]:
    try:
        return [str(o) for o in HydraConfig.get().overrides.task]
    except Exception:  # noqa: BLE001 - no Hydra run (called from a test): nothing was given
        return []


register_schema()
register_resolvers()


def start(raw: DictConfig) -> tuple[AesConfig, Path]:
    """The typed config (``resume=RUN_DIR``: that run's own), checked; the run dir, held and announced."""
    given = _given_overrides()
    applied: list[str] = []
    if raw.get("resume"):
        raw, applied = resume_config(Path(str(raw.resume)), given)
        given = applied
    cfg = load_config(raw)
    check_arguments(cfg, given)
    run_dir = Path(cfg.run_dir or HydraConfig.get().runtime.output_dir)
    if int(os.environ.get("SLURM_NTASKS", "1")) <= 1:  # a multi-node job: its leader node takes it (main)
        hold(run_dir)
    log.info("%s", describe_sizes(cfg))
    record_resume(run_dir, applied)
    RunPaths(run_dir).config.write_text(OmegaConf.to_yaml(OmegaConf.structured(cfg)))  # the typed, effective values
    log.info("writing to %s; to resume after Ctrl-C, a kill or a crash: %s", run_dir.resolve(), resume_hint(run_dir))
    return cfg, run_dir


def end(exc: BaseException, run_dir: Path | None) -> None:
    """One line for what stopped the job (a stop request, a known error, a full disk), else re-raise."""
    if interrupt.requested():  # whatever the stop cut short raised on its way out
        log.debug("on the way out after the stop: %r", exc)
        _stopped(run_dir)
    if isinstance(exc, KeyboardInterrupt):  # outside the handled section (e.g. while the config loads)
        _stop("stopped by Ctrl-C before the run started", 130)
    if isinstance(exc, RunFailed):
        _stop(str(exc), 1)
    if isinstance(exc, TaskLoadError):
        _stop(f"a task cannot be loaded ({exc.code}): {exc}", 2)
    if isinstance(exc, (ConfigError, InfrastructureError, SandboxUnavailable, SandboxError, DiskFull)):
        # InfrastructureError: e.g. a model server that does not answer (health check or mid-run)
        _stop(str(exc), 2 if isinstance(exc, ConfigError) else 1)
    if isinstance(exc, requests.exceptions.ConnectionError):  # docker-py's transport, outside a trial
        _stop(f"lost the Docker engine ({exc}); start it again and resume: "
              f"{resume_hint(run_dir) if run_dir else 'rerun the same command'}", 1)
    if isinstance(exc, Exception) and is_disk_full(exc):
        where = getattr(exc, "filename", None) or run_dir or Path.cwd()
        _stop(disk_full_message(where, f"{type(exc).__name__}: {exc}"), 1)
    raise exc


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(raw: DictConfig) -> None:
    run_dir: Path | None = None
    try:
        cfg, run_dir = start(raw)
        from aes.cluster import cluster_session

        with interrupt.handling(resume_hint(run_dir)):  # Ctrl-C, SIGTERM: a clean stop (aes/interrupt.py)
            with cluster_session(cfg, run_dir) as job:  # servers and trainer ranks the `cluster` section asks for
                if job.role == "leader":
                    hold(run_dir)
                ok = job.run(dispatch)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - sorted by end(): one line, or raised again
        end(exc, run_dir)
    if not ok:
        _stop(f"mode={cfg.mode} finished with failures; see {run_dir}", 1)


if __name__ == "__main__":
    main()
