"""Merge a composed Hydra config into the typed schema and report what is wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from aes.config.schema import AesConfig, ConfigError


SCHEMA_NAME = "aes_schema"


def register_schema() -> None:
    """Put the typed schema in Hydra's ConfigStore: ``conf/config.yaml`` composes on top of it,
    so every field exists (and can be overridden) even where no YAML file names it."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name=SCHEMA_NAME, node=AesConfig)


def load_config(cfg: DictConfig | dict[str, Any]) -> AesConfig:
    """Return the typed config, or raise :class:`ConfigError` naming the bad key."""
    if not isinstance(cfg, DictConfig):
        cfg = OmegaConf.create(cfg)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(AesConfig), cfg)
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or "?"
        raise ConfigError(f"bad config value at {key!r}: {exc}") from None


CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def compose_config(overrides: list[str] | None = None) -> AesConfig:
    """Compose ``conf/config.yaml`` with Hydra overrides, outside a Hydra run (for the CLI)."""
    from hydra import compose, initialize_config_dir

    if not CONF_DIR.is_dir():
        raise ConfigError(f"config directory {CONF_DIR} not found; install aes from its source tree (pip install -e .)")
    from hydra.errors import HydraException

    register_schema()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="config", overrides=list(overrides or []))
    except HydraException as exc:
        raise ConfigError(str(exc).strip()) from None
    return load_config(cfg)
