"""Typed configuration: schemas for every config group and the loader that checks them."""

from aes.config.load import CONF_DIR, compose_config, load_config, register_schema
from aes.config.schema import (
    AdmissionConfig,
    AesConfig,
    AgentConfig,
    BudgetConfig,
    CalibrationConfig,
    ConfigError,
    DomainConfig,
    EvalConfig,
    FlywheelConfig,
    HarnessConfig,
    HilConfig,
    LoggerConfig,
    ModelConfig,
    SandboxConfig,
    SFTConfig,
    TrainerConfig,
)

__all__ = [
    "CONF_DIR",
    "compose_config",
    "register_schema",
    "AdmissionConfig",
    "AesConfig",
    "AgentConfig",
    "BudgetConfig",
    "CalibrationConfig",
    "ConfigError",
    "DomainConfig",
    "EvalConfig",
    "FlywheelConfig",
    "HarnessConfig",
    "HilConfig",
    "LoggerConfig",
    "ModelConfig",
    "SandboxConfig",
    "SFTConfig",
    "TrainerConfig",
    "load_config",
]
