"""Scripted models for the simulated flywheel (``experiment=simulated``): no weights, no server.

The solver's only state is its ``skill``, which its trainer (:mod:`aes.train.simulated`)
raises with every DPPO update that had reward spread; the simulated sandbox turns skill and
task difficulty into rewards. The proposer's work is done by the scripted harness
(:mod:`aes.proposer.scripted`); its chat answers only the reflection.
"""

from __future__ import annotations

from typing import Any

from aes.config import ModelConfig
from aes.models.base import BaseChatModel, ChatResult, RunBudget, ToolSpec, Usage


class ScriptedModel(BaseChatModel):
    """A model that says one thing; the solver's ``skill`` lives here."""

    def __init__(self, cfg: ModelConfig, budget: RunBudget | None = None):
        super().__init__(cfg, budget)
        self.skill = 0.0

    def _chat_once(self, messages: list[dict[str, Any]], tools: list[ToolSpec] | None,
                   max_tokens: int, temperature: float) -> ChatResult:
        return ChatResult(text="DONE", usage=Usage(prompt_tokens=1, completion_tokens=1))
