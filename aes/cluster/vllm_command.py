"""The vLLM server command that is right for the model, decided before anything starts.

:func:`serving_plan` reads the served model's ``config.json`` (:mod:`aes.models.families`) and
decides:

* the tool-call parser (``cluster.tool_parser``: auto takes the family's; Qwen: ``hermes``) with
  ``--enable-auto-tool-choice``, or none: the solver then writes fenced blocks (``use_tools: false``);
* ``--max-model-len`` = ``solver.context_length`` and, past the model's own positions, the rope
  scaling its model card prescribes as ``--hf-overrides`` (the trainer loads the model with the
  same overrides), or a :class:`~aes.config.ConfigError` saying what to set;
* the weight path: NCCL weight transfer on GPUs (``--weight-transfer-config``), in-place reloads on
  CPU servers (``VLLM_SERVER_DEV_MODE=1`` opens both endpoint sets), and on CPU ``--enforce-eager``,
  ``--dtype`` from the config and a small KV cache (``VLLM_CPU_KVCACHE_SPACE``, GiB).

:func:`vllm_command` turns a plan into the server's argv.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from aes.cluster.vllm_env import serve_command, vllm_python
from aes.config import AesConfig, ConfigError
from aes.models.families import ContextPlan, Family, family_of, plan_context, read_config

log = logging.getLogger("aes.cluster")

CPU_KVCACHE_GIB = "1"
"""VLLM_CPU_KVCACHE_SPACE of a CPU server unless cluster.env sets it (GiB)."""


@dataclass
class ServingPlan:
    model: str
    family: Family
    tool_parser: str | None
    context: ContextPlan
    cpu: bool
    dtype: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def use_tools(self) -> bool:
        return self.tool_parser is not None


def serving_plan(cfg: AesConfig, model: str | None = None) -> ServingPlan:
    """What a vLLM server of ``cfg``'s solver serves, and how (a ConfigError when it could not start)."""
    from aes.models.export import served_directory

    c, solver = cfg.cluster, cfg.solver
    model = served_directory(model or c.model or solver.model)
    config = read_config(model, c.model_config)
    explicit = dict(solver.rope_scaling) if solver.rope_scaling else None
    context = plan_context(config, solver.context_length, model=model, explicit=explicit)
    fam = family_of(config)
    notes = [context.note]
    if c.tool_parser == "auto":
        parser = fam.tool_parser
        notes.append(f"tool calls: vLLM's {parser} parser ({fam.name} family)" if parser else
                     f"tool calls: none for the {fam.name} family ({config.get('model_type', '?')}): the agent writes "
                     "fenced blocks (set cluster.tool_parser to a vLLM parser name to change it)")
    elif c.tool_parser == "none":
        parser = None
        notes.append("tool calls: none (cluster.tool_parser=none): the agent writes fenced blocks")
    else:
        parser = c.tool_parser
        notes.append(f"tool calls: vLLM's {parser} parser (cluster.tool_parser)")
    if parser is not None and solver.use_tools is False:
        notes.append("solver.use_tools=false: the parser is started but the agent writes fenced blocks")
    cpu = c.gpus_per_server == 0
    dtype = None
    if cpu:
        dtype = {"float32": "float32", "bfloat16": "bfloat16", "float16": "bfloat16"}.get(
            str(config.get("dtype") or config.get("torch_dtype") or "bfloat16"), "bfloat16")
    return ServingPlan(model, fam, parser, context, cpu, dtype, notes)


def vllm_command(cfg: AesConfig, plan: ServingPlan, *, host: str, port: int, tp: int,
                 python: str | None = None) -> list[str]:
    """The argv of one vLLM server for ``plan`` (``cluster.extra_args`` are appended by the caller);
    ``python``: the interpreter with vLLM (default :func:`~aes.cluster.vllm_env.vllm_python`)."""
    solver = cfg.solver
    command = serve_command(python or vllm_python(cfg.cluster.python, strict=False), plan.model) + [
        "--host", host, "--port", str(port), "--served-model-name", solver.model,
        "--max-model-len", str(plan.context.max_model_len),
        # processed log-probs are those of the distribution actually sampled (after temperature): mu
        "--logprobs-mode", "processed_logprobs"]
    if plan.context.overrides:
        command += ["--hf-overrides", json.dumps(plan.context.overrides, sort_keys=True)]
    if plan.tool_parser is not None:
        command += ["--enable-auto-tool-choice", "--tool-call-parser", plan.tool_parser]
    if plan.cpu:
        command += ["--dtype", plan.dtype or "bfloat16", "--enforce-eager"]
    else:
        # weight transfer over NCCL lets the trainer push new weights without a restart
        command += ["--tensor-parallel-size", str(tp), "--weight-transfer-config", '{"backend": "nccl"}']
    return command


def server_env(cfg: AesConfig, plan: ServingPlan) -> dict[str, str]:
    env = {"VLLM_SERVER_DEV_MODE": "1"}  # the weight-update endpoints (pause, reload, weight version)
    if plan.cpu:
        env["VLLM_CPU_KVCACHE_SPACE"] = CPU_KVCACHE_GIB
    return env


def check_plan(cfg: AesConfig, plan: ServingPlan) -> None:
    """Refusals that need the plan: a solver asking for more context than the server is given."""
    if cfg.trainer.max_seq_len and cfg.trainer.max_seq_len > plan.context.max_model_len:
        raise ConfigError(f"trainer.max_seq_len={cfg.trainer.max_seq_len} exceeds the served context "
                          f"({plan.context.max_model_len}): lower it or raise solver.context_length")


__all__ = ["ServingPlan", "check_plan", "server_env", "serving_plan", "vllm_command"]
