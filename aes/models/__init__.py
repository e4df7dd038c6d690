"""Model clients: one chat interface (``aes.models.base``) with a backend per config file.

``conf/proposer/*.yaml`` and ``conf/solver/*.yaml`` name a ``backend``; :func:`build_model`
instantiates it and :func:`check_models` health-checks the built ones before a run starts
(a server that cannot be reached raises :class:`ModelUnavailable`, never a reward of 0).
Backends are imported lazily, so hosted-API users need no torch and
CPU users need no API SDK.
"""

from __future__ import annotations

import importlib

from aes.config import ConfigError, ModelConfig
from aes.models.base import (
    BaseChatModel,
    BudgetExhausted,
    ChatModel,
    ChatResult,
    ModelError,
    ModelUnavailable,
    RunBudget,
    ToolCall,
    ToolSpec,
    Usage,
    check_models,
)

BACKENDS = {
    "anthropic": "aes.models.anthropic_client:AnthropicChat",
    "openai": "aes.models.openai_client:OpenAIChat",
    "openai_compatible": "aes.models.openai_client:OpenAIChat",
    "local": "aes.models.local:LocalChat",
    "tiny": "aes.models.tiny:TinyChat",
    "scripted": "aes.models.scripted:ScriptedModel",
}


def build_model(cfg: ModelConfig, budget: RunBudget | None = None) -> ChatModel:
    """The chat model a proposer/solver config names."""
    if cfg.backend not in BACKENDS:
        raise ConfigError(f"unknown model backend {cfg.backend!r}; choose one of {', '.join(BACKENDS)}")
    module, _, cls = BACKENDS[cfg.backend].partition(":")
    return getattr(importlib.import_module(module), cls)(cfg, budget or RunBudget())


__all__ = [
    "BACKENDS",
    "BaseChatModel",
    "BudgetExhausted",
    "ChatModel",
    "ChatResult",
    "ModelError",
    "ModelUnavailable",
    "RunBudget",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "build_model",
    "check_models",
]
