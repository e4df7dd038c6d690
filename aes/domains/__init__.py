"""Per-domain instructions, rubrics and seed tasks (``aes/domains/<name>/``)."""

from __future__ import annotations

from pathlib import Path

from aes.config import ConfigError, DomainConfig


def seeds_dir(domain: DomainConfig) -> Path:
    """The directory of seed tasks of ``domain`` (config override or packaged seeds)."""
    path = Path(domain.seeds) if domain.seeds else Path(__file__).parent / domain.name / "seeds"
    if not path.is_dir():
        raise ConfigError(f"seed tasks of domain {domain.name!r} not found at {path}; set domain.seeds")
    return path


def instructions_dir(domain: DomainConfig) -> Path:
    """The proposer's instructions for ``domain`` (how to write a task, what to build)."""
    path = Path(__file__).parent / domain.name / "instructions"
    if not path.is_dir():
        raise ConfigError(f"domain {domain.name!r} has no proposer instructions at {path}")
    return path
