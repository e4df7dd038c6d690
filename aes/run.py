"""Hydra entry point: ``python -m aes.run [mode=...] [group=option ...]``.

Composes ``conf/``, checks it against the typed schema, and dispatches the mode.
"""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
import requests.exceptions
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from aes.config import AesConfig, ConfigError, load_config, register_schema
from aes.errors import InfrastructureError
from aes.paths import RunPaths
from aes.report.sizes import describe_sizes
from aes.sandbox.docker_backend import SandboxError
from aes.sandbox.docker_client import SandboxUnavailable
from aes.sandbox.engine import DiskFull, disk_full_message, is_disk_full

log = logging.getLogger("aes")


class RunFailed(RuntimeError):
    """The mode ran and reported failures (e.g. invalid tasks); the job must fail."""


def validate(cfg: AesConfig, run_dir: Path, tasks: str | None = None) -> bool:
    """Admission checks 1-4 on ``tasks`` (default: the domain's seed tasks)."""
    from aes.admission import validate_all
    from aes.compose import make_validator
    from aes.domains import seeds_dir
    from aes.report.validation import print_reports, write_json
    from aes.tasks import find_tasks

    source = Path(tasks or cfg.tasks or seeds_dir(cfg.domain))
    if not source.exists():
        raise ConfigError(f"tasks={source}: no such file or directory; set tasks= to a task dir (with task.toml) "
                          "or a dir of task dirs")
    paths = find_tasks([source])
    log.info("validating %d task(s) from %s", len(paths), source)
    validator = make_validator(cfg, logs_dir=run_dir / "trials")
    reports = validate_all(validator, paths, cfg.sandbox.concurrency)
    print_reports(reports, title=validator.describe())
    write_json(reports, run_dir / "validation.json")
    log.info("verdicts written to %s", run_dir / "validation.json")
    return all(r.valid for r in reports)


def run(cfg: AesConfig, run_dir: Path) -> bool:
    """The flywheel: rollouts -> assignments -> propose -> admit -> calibrate -> train -> refresh."""
    from aes.compose import build_flywheel
    from aes.flywheel import Flywheel

    flywheel = Flywheel(build_flywheel(cfg, run_dir))
    try:
        flywheel.run()
    finally:
        flywheel.close()
    from aes.paths import size_line

    log.info("run dir %s", size_line(run_dir))  # its size, largest parts first (trainer.keep_checkpoints)
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


register_schema()


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(raw: DictConfig) -> None:
    run_dir: Path | None = None
    try:
        cfg = load_config(raw)
        log.info("%s", describe_sizes(cfg))
        run_dir = Path(cfg.run_dir or HydraConfig.get().runtime.output_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        RunPaths(run_dir).config.write_text(OmegaConf.to_yaml(OmegaConf.structured(cfg)))  # the typed, effective values
        from aes.cluster import cluster_session

        with cluster_session(cfg, run_dir) as job:  # servers and trainer ranks the `cluster` section asks for
            ok = job.run(dispatch)
    except (ConfigError, InfrastructureError, SandboxUnavailable, SandboxError, DiskFull) as exc:
        # InfrastructureError: e.g. a model server that does not answer (health check or mid-run)
        _stop(str(exc), 2 if isinstance(exc, ConfigError) else 1)
    except requests.exceptions.ConnectionError as exc:  # docker-py's transport, outside a trial
        _stop(f"lost the Docker engine ({exc}); start it again and rerun the same command: the run "
              "resumes where it stopped", 1)
    except Exception as exc:  # noqa: BLE001 - only a full disk is turned into a message
        if not is_disk_full(exc):
            raise
        where = getattr(exc, "filename", None) or run_dir or Path.cwd()
        _stop(disk_full_message(where, f"{type(exc).__name__}: {exc}"), 1)
    if not ok:
        raise RunFailed(f"mode={cfg.mode} finished with failures; see {run_dir}")


if __name__ == "__main__":
    main()
