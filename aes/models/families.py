"""What a served model's family needs: its tool-call parser and its long-context recipe.

A Hugging Face model says what it is in ``config.json`` (``model_type``) and how long it may
read (``max_position_embeddings``, ``rope_parameters``/``rope_scaling``). From those this module
decides, before any server starts:

* **tool calls** — the vLLM tool parser that reads the family's calls back into ``tool_calls``
  (Qwen2/2.5/3 write ``<tool_call>{json}</tool_call>``: ``hermes``), or none: the family has no
  tool-call format, the solver is told to write fenced blocks (``use_tools: false``);
* **context** — the ``--max-model-len`` to serve and the config overrides that make it valid:
  the model's own positions when they suffice; the rope scaling its model card prescribes when the
  wanted context is longer (Qwen3 and Qwen2.5: YaRN, factor 4 over 32,768 positions); or a
  :class:`~aes.config.ConfigError` that says what to set. The same overrides go to the trainer's
  model load (:func:`trainer_overrides`), so it trains at the context it samples at.

``config.json`` comes from a local model directory, the Hugging Face cache, a download of that
one file (unless ``HF_HUB_OFFLINE``), or a stand-in named by ``cluster.model_config``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from aes.config import ConfigError


def _yarn_over(original: int, max_factor: float) -> Callable[[dict, int], dict | None]:
    """A model card's static YaRN recipe: ``factor`` over ``original`` positions (at most ``max_factor``)."""

    def recipe(config: dict, target: int) -> dict | None:
        factor = float(max(1, math.ceil(target / original)))
        if factor > max_factor:
            return None
        # the model card's factor (4 for Qwen: 32,768 -> 131,072) whatever the target within it
        factor = max_factor
        rope = dict(rope_parameters(config))
        rope.update({"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": original})
        rope.pop("type", None)
        # transformers and vLLM both read a YaRN config's max_position_embeddings as the scaled length
        return {"rope_parameters": rope, "max_position_embeddings": int(original * factor)}

    return recipe


@dataclass(frozen=True)
class Family:
    name: str
    model_types: tuple[str, ...]
    tool_parser: str | None
    """vLLM's ``--tool-call-parser`` for the family; None: no tool-call format (fenced blocks)."""
    long_context: Callable[[dict, int], dict | None] | None = None
    """The model card's rope-scaling overrides for a context past the model's own positions."""
    card: str = ""
    """Where the recipe comes from (quoted in messages)."""


FAMILIES = (
    Family("qwen3", ("qwen3", "qwen3_moe"), "hermes", _yarn_over(32768, 4.0),
           "Qwen3 model card: YaRN, factor 4.0, original_max_position_embeddings 32768"),
    Family("qwen2", ("qwen2", "qwen2_moe"), "hermes", _yarn_over(32768, 4.0),
           "Qwen2.5 model card: YaRN, factor 4.0, original_max_position_embeddings 32768"),
    Family("llama", ("llama",), None),
)
UNKNOWN = Family("unknown", (), None)


def family_of(config: dict) -> Family:
    model_type = str(config.get("model_type", ""))
    return next((f for f in FAMILIES if model_type in f.model_types), UNKNOWN)


def rope_parameters(config: dict) -> dict:
    """The config's rope parameters, whichever key it uses (transformers 5: rope_parameters)."""
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    rope = dict(rope)
    if "rope_theta" not in rope and "rope_theta" in config:
        rope["rope_theta"] = config["rope_theta"]
    rope.setdefault("rope_type", rope.pop("type", "default"))
    return rope


def native_positions(config: dict) -> int:
    """The context the config supports as it stands (YaRN configs already give the scaled length)."""
    positions = int(config.get("max_position_embeddings") or 0)
    rope = rope_parameters(config)
    if rope.get("rope_type") in ("linear", "dynamic") and rope.get("factor"):
        positions = int(positions * float(rope["factor"]))
    return positions


@dataclass
class ContextPlan:
    """How the model is served and trained at ``max_model_len`` tokens."""

    max_model_len: int
    overrides: dict[str, Any] = field(default_factory=dict)
    """Config overrides for vLLM's --hf-overrides and the trainer's from_pretrained (empty: none)."""
    note: str = ""


def plan_context(config: dict, target: int, *, model: str, explicit: dict | None = None) -> ContextPlan:
    """The context decision for serving ``model`` (its ``config``) at ``target`` tokens; a ConfigError
    that says what to set when no recipe makes ``target`` valid."""
    positions = native_positions(config)
    if explicit:
        merged = {**config, **explicit}
        if explicit.get("rope_parameters") and "max_position_embeddings" not in explicit:
            raise ConfigError(f"solver.rope_scaling for {model} must also set max_position_embeddings (the scaled "
                              "length, as transformers and vLLM read a rope-scaled config)")
        have = native_positions(merged)
        if target > have:
            raise ConfigError(f"solver.context_length={target} exceeds what {model} reads with solver.rope_scaling "
                              f"({have} positions): raise its factor or lower solver.context_length")
        return ContextPlan(target, dict(explicit), f"solver.rope_scaling as set: {have} positions")
    if positions and target <= positions:
        return ContextPlan(target, {}, f"{model} reads {positions} positions as configured")
    fam = family_of(config)
    recipe = fam.long_context(config, target) if fam.long_context else None
    if recipe is not None:
        return ContextPlan(target, recipe, f"{model} reads {positions} positions; {target} with rope scaling "
                                           f"({fam.card})")
    raise ConfigError(
        f"solver.context_length={target} exceeds {model}'s max_position_embeddings={positions} and aes knows no "
        f"rope-scaling recipe for its family ({config.get('model_type', '?')}) that reaches it: lower "
        f"solver.context_length to {positions}, or set solver.rope_scaling to the model card's overrides, e.g. "
        "{rope_parameters: {rope_type: yarn, factor: 4.0, original_max_position_embeddings: 32768}, "
        "max_position_embeddings: 131072}")


def read_config(model: str, stand_in: str | None = None) -> dict:
    """``config.json`` of ``model`` (a local directory or a Hugging Face id) or of ``stand_in``."""
    if stand_in:
        path = Path(stand_in)
        path = path / "config.json" if path.is_dir() else path
        if not path.is_file():
            raise ConfigError(f"cluster.model_config={stand_in}: no such config.json")
        return json.loads(path.read_text())
    local = Path(model)
    if (local / "config.json").is_file():
        return json.loads((local / "config.json").read_text())
    problem = "not a local directory with a config.json"
    try:
        from huggingface_hub import hf_hub_download, try_to_load_from_cache

        cached = try_to_load_from_cache(model, "config.json")
        if isinstance(cached, str):
            return json.loads(Path(cached).read_text())
        if os.environ.get("HF_HUB_OFFLINE", "0") not in ("1", "true", "True"):
            return json.loads(Path(hf_hub_download(model, "config.json")).read_text())
        problem += ", not in the Hugging Face cache, and HF_HUB_OFFLINE is set"
    except Exception as exc:  # noqa: BLE001 - any hub failure: say what it was
        problem += f", and its config.json could not be fetched ({type(exc).__name__}: {str(exc)[:200]})"
    raise ConfigError(f"cannot read the config of {model} ({problem}): download the model, point "
                      "cluster.model at a local copy, or cluster.model_config at a copy of its config.json")


def trainer_overrides(solver, cluster=None) -> dict:
    """The config overrides the trainer loads ``solver.model`` with (those vLLM serves it with)."""
    model = (getattr(cluster, "model", None) or solver.model) if cluster is not None else solver.model
    stand_in = getattr(cluster, "model_config", None) if cluster is not None else None
    explicit = dict(solver.rope_scaling) if getattr(solver, "rope_scaling", None) else None
    try:
        config = read_config(model, stand_in)
    except ConfigError:
        if explicit:
            return explicit
        raise
    return plan_context(config, solver.context_length, model=model, explicit=explicit).overrides
