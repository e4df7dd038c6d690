"""Merge a composed Hydra config into the typed schema and report what is wrong."""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from aes.config.schema import AesConfig, ConfigError


SCHEMA_NAME = "aes_schema"


LAUNCHER_SET = ("cluster",)
"""Sections a launcher profile may fill (``slurm/hydra/launcher/*.yaml`` pull in
``slurm/cluster_profile/*.yaml``). Hydra merges the launcher's defaults before the primary
config's, so in the stored schema these sections are typed but unset (MISSING never overrides a
value); :func:`load_config` fills what is still unset from the dataclass defaults."""


def schema_node() -> DictConfig:
    """The typed schema as stored for composition (see :data:`LAUNCHER_SET`)."""
    node = OmegaConf.structured(AesConfig)
    for section in LAUNCHER_SET:
        for key in node[section]:
            node[section][key] = "???"
    return node


def register_schema() -> None:
    """Put the typed schema in Hydra's ConfigStore: ``conf/config.yaml`` composes on top of it,
    so every field exists (and can be overridden) even where no YAML file names it."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name=SCHEMA_NAME, node=schema_node())


def _dataclass_in(tp: Any) -> type | None:
    """The dataclass a field's type holds directly or as Optional[...]."""
    if dataclasses.is_dataclass(tp):
        return tp
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        found = [a for a in typing.get_args(tp) if dataclasses.is_dataclass(a)]
        return found[0] if len(found) == 1 else None
    return None


def unknown_keys(data: Any, schema: type = AesConfig, prefix: str = "") -> list[str]:
    """Keys of ``data`` (plain containers) that ``schema`` has no field for, as dotted paths.

    Checked before the merge: keys added with Hydra's ``+`` land in struct nodes with the struct
    flag lifted, and OmegaConf's merge then carries them into the typed config (they became
    stray attributes of the dataclass) instead of refusing them."""
    if not isinstance(data, dict):
        return []
    hints = typing.get_type_hints(schema)
    names = [f.name for f in dataclasses.fields(schema)]
    bad: list[str] = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            bad.append(path + (f" (did you mean {prefix}{close[0]}?)" if close else ""))
            continue
        tp = hints[key]
        inner = _dataclass_in(tp)
        if inner is not None:
            bad += unknown_keys(value, inner, f"{path}.")
            continue
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is list and args and dataclasses.is_dataclass(args[0]) and isinstance(value, list):
            for i, item in enumerate(value):
                bad += unknown_keys(item, args[0], f"{path}[{i}].")
        elif origin is dict and len(args) == 2 and dataclasses.is_dataclass(args[1]) and isinstance(value, dict):
            for k, item in value.items():
                bad += unknown_keys(item, args[1], f"{path}.{k}.")
    return bad


def load_config(cfg: DictConfig | dict[str, Any]) -> AesConfig:
    """Return the typed config, or raise :class:`ConfigError` naming the bad key.

    Keys the schema does not have are refused, also when added with Hydra's ``+`` (a ``hydra``
    node, Hydra's own, is left alone)."""
    if not isinstance(cfg, DictConfig):
        cfg = OmegaConf.create(cfg)
    try:
        plain = OmegaConf.to_container(cfg, resolve=False)
    except OmegaConfBaseException as exc:
        raise ConfigError(f"bad config: {exc}") from None
    plain.pop("hydra", None)
    bad = unknown_keys(plain)
    if bad:
        raise ConfigError(f"unknown config key{'s' if len(bad) > 1 else ''} {', '.join(bad)}: the typed schema "
                          "(aes/config/schema.py) has no such field")
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
