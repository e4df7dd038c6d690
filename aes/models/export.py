"""Models as Hugging Face directories a real ``vllm serve`` loads (no download).

* :func:`export_smollm2` — the embedded SmolLM2-135M-Instruct, dequantised from its GGUF
  (:func:`aes.models.hf_chat.load_gguf_policy`) and saved with its tokenizer and chat template
  (bf16 by default: what vLLM's CPU build runs fastest). SmolLM2 has no tool-call format: it is
  served without a tool parser and the agent writes fenced blocks.
* :func:`export_tiny` — a tiny random preset of :mod:`aes.models.tiny` (``tiny-qwen2-vllm``: heads
  of 32 dimensions, the smallest vLLM's CPU attention runs) with its tokenizer and a ChatML chat
  template that renders tools the way Qwen models do: the tool schemas in ``<tools>`` in the system
  turn, each call as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` and each result
  in ``<tool_response>``. vLLM's ``hermes`` tool parser reads such calls back.

``python -m aes.models.export {smollm2,tiny} DIR`` writes one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import torch

QWEN_STYLE_TOOLS_TEMPLATE = """\
{%- set system = messages[0]['content'] if messages and messages[0]['role'] == 'system' else '' -%}
{%- if tools -%}
  {{- '<|im_start|>system\\n' + system + ('\\n\\n' if system else '') -}}
  {{- 'Tools you can call are described in JSON in the <tools> block:\\n<tools>' -}}
  {%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}
  {{- '\\n</tools>\\n\\nTo call one, write a JSON object with its name and arguments inside <tool_call> tags:\\n' -}}
  {{- '<tool_call>\\n{"name": "tool name", "arguments": {"argument": "value"}}\\n</tool_call><|im_end|>\\n' -}}
{%- elif system -%}
  {{- '<|im_start|>system\\n' + system + '<|im_end|>\\n' -}}
{%- endif -%}
{%- for message in messages -%}
  {%- if message['role'] == 'system' and loop.first -%}
  {%- elif message['role'] == 'tool' -%}
    {{- '<|im_start|>user\\n<tool_response>\\n' + message['content'] + '\\n</tool_response><|im_end|>\\n' -}}
  {%- elif message['role'] == 'assistant' -%}
    {{- '<|im_start|>assistant\\n' + (message['content'] or '') -}}
    {%- for call in message.get('tool_calls') or [] -%}
      {%- set fn = call['function'] if call.get('function') else call -%}
      {%- if message['content'] or not loop.first -%}{{- '\\n' -}}{%- endif -%}
      {{- '<tool_call>\\n{"name": "' + fn['name'] + '", "arguments": ' -}}
      {%- if fn['arguments'] is string -%}{{- fn['arguments'] -}}{%- else -%}{{- fn['arguments'] | tojson -}}{%- endif -%}
      {{- '}\\n</tool_call>' -}}
    {%- endfor -%}
    {{- '<|im_end|>\\n' -}}
  {%- else -%}
    {{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}
"""
"""ChatML with tools in the layout of Qwen2.5/Qwen3 (our own wording): what the ``hermes`` parser reads."""


def untie(model) -> None:
    """Give ``model`` its own ``lm_head`` (a copy of the embeddings): vLLM's in-place weight reload
    (trainer.weight_sync=vllm_reload) cannot update an lm_head tied to the embeddings."""
    if not getattr(model.config, "tie_word_embeddings", False):
        return
    model.config.tie_word_embeddings = False
    model.lm_head.weight = torch.nn.Parameter(model.get_input_embeddings().weight.detach().clone())


def save_policy(policy, out: str | Path, *, dtype: torch.dtype | None = None, chat_template: str | None = None,
                untied: bool = True) -> Path:
    """``policy`` (:class:`aes.models.hf_chat.Policy`) as a Hugging Face directory: config, safetensors,
    tokenizer files and the chat template (``chat_template`` replaces the tokenizer's); ``untied``:
    its own lm_head (see :func:`untie`; the function the model computes is the same)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model = policy.model
    if untied:
        untie(model)
    state = None
    if dtype is not None:
        state = {k: v.detach().to(dtype) for k, v in model.state_dict().items()}
    model.save_pretrained(out, state_dict=state)
    if dtype is not None:  # the config says what the tensors are
        config = json.loads((out / "config.json").read_text())
        config["dtype"] = str(dtype).removeprefix("torch.")
        config.pop("torch_dtype", None)
        (out / "config.json").write_text(json.dumps(config, indent=2))
    tokenizer = policy.tokenizer
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    tokenizer.save_pretrained(out)
    return out


def export_tiny(out: str | Path, preset: str = "tiny-qwen2-vllm", seed: int = 0,
                max_positions: int = 4096) -> Path:
    """A tiny random preset with its tokenizer and the Qwen-style tools template (float32)."""
    from aes.models.tiny import build_model, build_tokenizer

    tokenizer = build_tokenizer()
    model = build_model(preset, len(tokenizer), seed=seed, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id, max_positions=max_positions)
    from aes.models.hf_chat import Policy

    return save_policy(Policy(model=model, tokenizer=tokenizer, name=preset), out,
                       chat_template=QWEN_STYLE_TOOLS_TEMPLATE)


def export_smollm2(out: str | Path, *, dtype: torch.dtype = torch.bfloat16) -> Path:
    """The embedded SmolLM2-135M-Instruct, dequantised, as a Hugging Face directory (~270 MB in bf16)."""
    from aes.models.hf_chat import load_gguf_policy

    out = Path(out)
    if (out / "config.json").is_file() and any(out.glob("*.safetensors")):
        return out
    # written beside it and renamed into place: a second process (another run, a parallel test)
    # never reads a half-written directory, and the first rename wins
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    save_policy(load_gguf_policy(), tmp, dtype=dtype)
    if out.exists() and not (out / "config.json").is_file():
        shutil.rmtree(out, ignore_errors=True)  # what a crashed export left
    try:
        os.rename(tmp, out)
    except OSError:
        if not (out / "config.json").is_file():
            raise
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def served_directory(model: str) -> str:
    """What vLLM loads for ``model``: the embedded SmolLM2 (by alias) as its exported Hugging Face
    directory under ``.aes-cache/models/`` (made on first use, ~30 s), any other model as it is."""
    from aes.models.local import SMOLLM2_ALIASES

    if model.strip().lower() not in SMOLLM2_ALIASES:
        if model.strip().lower().endswith(".gguf"):
            from aes.config import ConfigError

            raise ConfigError(f"vLLM serves Hugging Face model directories, not {model}: export it (python -m "
                              "aes.models.export) or serve it with cluster.backend=llamacpp")
        return model
    from aes.cluster.vllm_env import REPO

    return str(export_smollm2(REPO / ".aes-cache" / "models" / "smollm2-135m-instruct-bf16"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m aes.models.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("which", choices=("smollm2", "tiny"))
    parser.add_argument("out")
    parser.add_argument("--preset", default="tiny-qwen2-vllm")
    args = parser.parse_args(argv)
    path = export_smollm2(args.out) if args.which == "smollm2" else export_tiny(args.out, args.preset)
    print(path)


if __name__ == "__main__":
    main()
