"""The DeepSpeed engine that trains the policy, the same code on CPU (gloo) and GPU (NCCL).

Gradient accumulation is caller-owned (``managed_gradient_accumulation: false``): one update
runs however many micro-batches its tokens need, each ``backward`` only accumulates, and one
``step`` clips, reduces and applies the update. ``torch_adam`` (default) makes DeepSpeed use
``torch.optim.AdamW``, so no optimizer kernel is compiled; the only op the CPU path builds is
``shm_comm`` (see ``python -m aes.train.warm_ops``).

A plain ``python`` process gets a one-rank process group (RANK=0, WORLD_SIZE=1, a free
MASTER_PORT); under ``deepspeed``/``torchrun`` the launcher's variables are used.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
from pathlib import Path
from typing import Any

import torch

from aes.config import TrainerConfig


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def on_cpu() -> bool:
    from deepspeed.accelerator import get_accelerator

    return get_accelerator().device_name() == "cpu"


log = logging.getLogger(__name__)
_OWNER = "AES_SINGLE_RANK_PID"
"""Marks the one-rank variables aes set for itself, so a child process does not take them for a launcher's."""


def ensure_distributed() -> None:
    """Initialise torch.distributed through DeepSpeed (a one-rank group for a plain process)."""
    import deepspeed
    from deepspeed.accelerator import get_accelerator

    from aes.train.warm_ops import load_probe

    if not load_probe():
        log.warning("DeepSpeed will probe its ops now (it compiles test programs): run `python -m "
                    "aes.train.warm_ops` (launchers/setup.sh does) to do it once, ahead of runs")
    if torch.distributed.is_initialized():
        deepspeed.init_distributed(dist_init_required=False)
        return
    owner = os.environ.get(_OWNER)
    if owner is not None and owner != str(os.getpid()):
        # set by an aes parent process for itself (inherited, not a launcher's): its port is taken
        for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", _OWNER):
            os.environ.pop(key, None)
    if "RANK" not in os.environ:
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(_free_port()), **{_OWNER: str(os.getpid())})
    deepspeed.init_distributed(dist_backend=get_accelerator().communication_backend_name(),
                               auto_mpi_discovery=False, verbose=False)


def ds_config(cfg: TrainerConfig, cpu: bool) -> dict[str, Any]:
    """The DeepSpeed JSON config of a trainer config (bf16 follows the device unless set)."""
    ds = cfg.deepspeed
    bf16 = (not cpu) if ds.bf16 is None else ds.bf16
    zero: dict[str, Any] = {"stage": ds.zero_stage}
    if ds.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": not cpu}
    if ds.offload_param:
        zero["offload_param"] = {"device": "cpu", "pin_memory": not cpu}
    return {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "managed_gradient_accumulation": False,
        "gradient_clipping": ds.gradient_clipping,
        "optimizer": {"type": "AdamW", "params": {"lr": cfg.lr, "weight_decay": cfg.weight_decay,
                                                   "betas": [0.9, 0.999], "eps": 1e-8,
                                                   "torch_adam": ds.torch_adam}},
        "zero_optimization": zero,
        "zero_allow_untested_optimizer": True,
        "zero_force_ds_cpu_optimizer": not ds.torch_adam,
        "bf16": {"enabled": bf16},
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }


def build_engine(model: torch.nn.Module, cfg: TrainerConfig) -> Any:
    """``deepspeed.initialize`` on ``model`` (a transformers causal LM); returns the engine."""
    import deepspeed

    ensure_distributed()
    if cfg.gradient_checkpointing:
        enable = getattr(model, "activation_checkpointing_enable", None) or getattr(
            model, "gradient_checkpointing_enable", None)
        if enable is None:
            raise TypeError("trainer.gradient_checkpointing needs a transformers model; set it to false")
        enable()
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the policy has no trainable parameters (all requires_grad=False)")
    engine, *_ = deepspeed.initialize(model=model, model_parameters=params, config=ds_config(cfg, on_cpu()))
    if engine.zero_optimization_stage() == 0 and torch.distributed.get_world_size() == 1:
        # one rank has nothing to all-reduce; DeepSpeed would still copy every gradient into a
        # flat bucket and back at each step (a full extra gradient copy in memory)
        engine.enable_backward_allreduce = False
    return engine


def save_checkpoint(engine: Any, directory: str | Path, step: int, client_state: dict[str, Any],
                    keep: int | None = None) -> str:
    """Save model, optimizer and ``client_state`` under ``directory/step_<step>``; returns the tag.
    ``keep``: delete all but the newest ``keep`` ``step_*`` checkpoints (rank 0, after the save)."""
    tag = f"step_{step}"
    engine.save_checkpoint(str(directory), tag=tag, client_state=client_state)
    if keep and int(os.environ.get("RANK", "0")) == 0:
        steps = sorted((p for p in Path(directory).glob("step_*") if p.is_dir() and p.name[5:].isdigit()),
                       key=lambda p: int(p.name[5:]))
        for old in steps[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return tag


def load_checkpoint(engine: Any, directory: str | Path, tag: str | None = None) -> dict[str, Any]:
    """Load the latest (or ``tag``) checkpoint of ``directory``; returns its client state."""
    directory = Path(directory)
    if tag is None and not (directory / "latest").is_file():
        raise FileNotFoundError(f"no DeepSpeed checkpoint in {directory} (no 'latest' file); "
                                "pass the directory DPPOTrainer.save wrote")
    path, client_state = engine.load_checkpoint(str(directory), tag=tag)
    if path is None:
        raise FileNotFoundError(f"DeepSpeed found no checkpoint {tag or 'latest'} in {directory}")
    return client_state or {}
