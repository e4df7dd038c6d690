"""Weight sync to the llama.cpp engine: write the trained weights as a GGUF, reload the engine.

The embedded solver samples with llama.cpp (fast, CPU) and trains a dequantised
transformers copy of the same model. After each update the trained weights are written
into a GGUF with the original file's metadata and tensor layout (llama architecture:
Hugging Face names mapped to GGUF names, q/k projections permuted back to llama.cpp's
rotary layout); :class:`aes.train.sync.GGUFExport` then reloads the engine from it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

_LAYER = {
    "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
}
_GLOBAL = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
           "lm_head.weight": "output.weight"}
EXPORT_TYPES = ("f32", "f16", "q8_0")


def gguf_name(hf_name: str) -> str | None:
    """The GGUF tensor name of a Hugging Face llama parameter (None if it has none)."""
    if hf_name in _GLOBAL:
        return _GLOBAL[hf_name]
    match = re.fullmatch(r"model\.layers\.(\d+)\.(.+)\.weight", hf_name)
    if match and match.group(2) in _LAYER:
        return f"blk.{match.group(1)}.{_LAYER[match.group(2)]}.weight"
    return None


def permute_for_llama_cpp(weight: np.ndarray, n_head: int) -> np.ndarray:
    """Hugging Face rotary layout -> llama.cpp's (what llama.cpp's converter does to q and k)."""
    return (weight.reshape(n_head, 2, weight.shape[0] // n_head // 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


def _field_value(field: Any) -> Any:
    return field.contents()


def export_gguf(params: Iterable[tuple[str, torch.Tensor]], config: Any, template: Path, dest: Path,
                dtype: str = "f32") -> Path:
    """Write ``params`` (Hugging Face names) as a GGUF shaped like ``template``; atomic.

    ``config`` is the model's transformers config (head counts); every tensor of the
    template must have a trained counterpart.
    """
    import gguf

    if dtype not in EXPORT_TYPES:
        raise ValueError(f"GGUF export type must be one of {EXPORT_TYPES}, got {dtype!r}")
    reader = gguf.GGUFReader(str(template))
    arch = _field_value(reader.fields["general.architecture"])
    if arch != "llama":
        raise ValueError(f"{template}: only llama-architecture GGUF models can be re-exported (found {arch})")
    n_head = int(config.num_attention_heads)
    n_kv = int(getattr(config, "num_key_value_heads", None) or n_head)
    # Copy while collecting: under ZeRO-3 a gathered parameter is empty once its gather ends.
    by_gguf = {gguf_name(k.removeprefix("module.")): v.detach().to("cpu", torch.float32, copy=True)
               for k, v in params if gguf_name(k.removeprefix("module."))}
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    writer = gguf.GGUFWriter(str(tmp), arch)
    file_type = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                 "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[dtype]
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == "general.file_type":
            writer.add_file_type(file_type)
            continue
        sub = field.types[1] if field.types[0] == gguf.GGUFValueType.ARRAY and len(field.types) > 1 else None
        writer.add_key_value(name, _field_value(field), field.types[0], sub)
    for tensor in reader.tensors:
        if tensor.name not in by_gguf:
            raise KeyError(f"the trained model has no weight for GGUF tensor {tensor.name}")
        weight = by_gguf[tensor.name].detach().to(torch.float32).cpu().numpy()
        if tensor.name.endswith("attn_q.weight"):
            weight = permute_for_llama_cpp(weight, n_head)
        elif tensor.name.endswith("attn_k.weight"):
            weight = permute_for_llama_cpp(weight, n_kv)
        _add_tensor(writer, tensor.name, weight, dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp, dest)
    return dest


def _add_tensor(writer: Any, name: str, weight: np.ndarray, dtype: str) -> None:
    import gguf

    if weight.ndim == 1 or dtype == "f32":  # norms stay F32, as llama.cpp expects
        writer.add_tensor(name, np.ascontiguousarray(weight, dtype=np.float32))
    elif dtype == "f16":
        writer.add_tensor(name, np.ascontiguousarray(weight, dtype=np.float16))
    else:
        qtype = gguf.GGMLQuantizationType.Q8_0
        data = gguf.quants.quantize(np.ascontiguousarray(weight, dtype=np.float32), qtype)
        writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)
