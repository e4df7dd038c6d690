"""The preflight: what a command line would serve and train, checked before anything starts.

``aes doctor [OVERRIDES...]`` (and the job itself, :mod:`aes.cluster.session`, before it starts a
server) runs these checks for a solver served by vLLM:

* the model's ``config.json`` is readable (the model, the Hugging Face cache, one download, or
  ``cluster.model_config``);
* the tool-call parser of its family, or fenced blocks;
* the context decision: ``solver.context_length`` within the model's positions, or the rope
  scaling of its model card (to the server as ``--hf-overrides``, to the trainer's model load), or
  a stop that says what to set;
* where vLLM is installed here, vLLM itself validates that decision (its own model config, as the
  server builds it at start, without loading weights).

It prints the server command it would run. Exit status 0 when the run could start, 1 when it would stop.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from aes.config import AesConfig, ConfigError

VLLM_CHECK = """\
import json, sys
from vllm.engine.arg_utils import EngineArgs
model, max_len, overrides = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
args = EngineArgs(model=model, max_model_len=max_len, hf_overrides=overrides or {}, skip_tokenizer_init=True,
                  enforce_eager=True)
try:
    config = args.create_model_config()
except Exception as exc:
    print(json.dumps({"ok": False, "error": " ".join(str(exc).split())[:2000]}))
else:
    print(json.dumps({"ok": True, "max_model_len": config.max_model_len}))
"""


@dataclass
class Preflight:
    ok: bool = True
    lines: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    stop: str = ""

    def say(self, line: str) -> None:
        self.lines.append(line)


def served_by_vllm(cfg: AesConfig) -> bool:
    from aes.train.backends import is_gguf

    s, c = cfg.solver, cfg.cluster
    if s.backend != "openai_compatible" or c.command or s.engine == "llamacpp":
        return False
    if c.servers > 0:
        return c.backend == "vllm"
    return s.engine == "vllm" or not is_gguf(c.model or s.model)


def vllm_accepts(python: str, model: str, max_model_len: int, overrides: dict, timeout: float = 300.0) -> dict:
    """vLLM's own verdict on serving ``model`` at ``max_model_len`` with ``overrides`` (its model config
    as the server builds it, no weights loaded): ``{"ok": bool, ...}``."""
    proc = subprocess.run([python, "-c", VLLM_CHECK, model, str(max_model_len), json.dumps(overrides)],
                          capture_output=True, text=True, timeout=timeout)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"ok": False, "error": f"the check exited {proc.returncode}: {proc.stderr.strip()[-800:]}"}


def preflight(cfg: AesConfig, *, ask_vllm: bool = True) -> Preflight:
    """The checks of the module doc for ``cfg``; never raises for a stop (``result.ok`` is False)."""
    from aes.cluster.vllm_command import serving_plan, vllm_command
    from aes.cluster.vllm_env import vllm_python

    out = Preflight()
    s, c = cfg.solver, cfg.cluster
    out.say(f"solver: {s.name} ({s.backend}, model {s.model}, context_length {s.context_length})")
    if not served_by_vllm(cfg):
        out.say("the solver is not served by vLLM: nothing to check here")
        return out
    try:
        plan = serving_plan(cfg)
    except ConfigError as exc:
        out.ok, out.stop = False, str(exc)
        out.say(f"STOP before any server starts: {exc}")
        return out
    for note in plan.notes:
        out.say(note)
    if plan.context.overrides:
        out.say("the trainer loads the model with the same overrides: " + json.dumps(plan.context.overrides,
                                                                                       sort_keys=True))
    try:
        python = vllm_python(c.python)
    except ConfigError as exc:
        python = None
        out.say(f"vLLM is not installed here ({exc.args[0].split(':')[0]}): the command names `python`")
    port = c.port if c.port is not None else 8000
    out.command = vllm_command(cfg, plan, host=c.bind_host or "127.0.0.1", port=port,
                               tp=max(1, c.gpus_per_server), python=python or "python") + [str(a) for a in c.extra_args]
    out.say("server command: " + shlex.join(out.command))
    if python is not None and ask_vllm:
        model = plan.model
        if c.model_config:  # vLLM reads a directory: the stand-in's
            model = c.model_config if Path(c.model_config).is_dir() else str(Path(c.model_config).parent)
        verdict = vllm_accepts(python, model, plan.context.max_model_len, plan.context.overrides)
        if verdict.get("ok"):
            out.say(f"vLLM accepts it: max_model_len {verdict['max_model_len']} for {model}")
        else:
            out.ok, out.stop = False, f"vLLM refuses the model config: {verdict.get('error')}"
            out.say("STOP: " + out.stop)
    return out


__all__ = ["Preflight", "preflight", "vllm_accepts"]
