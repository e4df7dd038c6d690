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


def decontam_index_path(domain: DomainConfig) -> Path | None:
    """The hash file of ``domain.decontam_index`` (None when unset). A relative path is looked up
    in the domain's package dir (``aes/domains/<name>/``, where the default ships) first, then
    in the working directory."""
    if not domain.decontam_index:
        return None
    raw = Path(domain.decontam_index).expanduser()
    places = [raw] if raw.is_absolute() else [Path(__file__).parent / domain.name / raw, raw]
    for place in places:
        if place.is_file():
            return place
    raise ConfigError(f"domain.decontam_index: {domain.decontam_index} not found (looked at "
                      f"{', '.join(str(p) for p in places)}); set it to a hash file written by "
                      "`aes decontam build`, or to null to run without one")
