"""Solver (and shared-policy proposer) training with DPPO on DeepSpeed (paper §3.3).

- :mod:`aes.train.dppo` the loss and per-token log-probs
- :mod:`aes.train.episodes` training sequences from ATIF trajectories (multi-turn and truncation rules)
- :mod:`aes.train.advantages` group advantages, dynamic batch filling, the proposer reward
- :mod:`aes.train.batching` micro-batches under a token budget
- :mod:`aes.train.engine` the DeepSpeed engine (CPU and GPU alike), checkpoints
- :mod:`aes.train.backends` the trainable solver backends and the weight syncs each allows (the top of
  the package: it imports policy, sync and trainer, none of them imports it)
- :mod:`aes.train.weights` what the weight syncs share (full parameters, the block a chat client's weights change in)
- :mod:`aes.train.vllm_reload` new weights into running vLLM servers by an in-place reload (CPU)
- :mod:`aes.train.sync` weight sync to the rollout engine (llama.cpp via GGUF export, in-process, vLLM)
- :mod:`aes.train.gguf_export` trained weights as a GGUF for llama.cpp
- :mod:`aes.train.warm_ops` build DeepSpeed's ops ahead of time (``python -m aes.train.warm_ops``)
- :mod:`aes.train.trainer` :class:`PolicyTrainer` (engine, steps, checkpoints) and :class:`DPPOTrainer`, what the flywheel calls
- :mod:`aes.train.render` stored trajectories without token ids rendered with the policy's chat template
- :mod:`aes.train.sft` the cold start: supervised fine-tuning on selected trajectories (``mode=sft``)

DeepSpeed's compiled ops go to this checkout's ``.aes-cache/torch_extensions`` (unless
``TORCH_EXTENSIONS_DIR`` says otherwise): torch rebuilds an op whenever its include paths change, so
two checkouts (two venvs) sharing ``~/.cache/torch_extensions`` rebuilt each other's ``shm_comm`` in
turn, and a fresh clone's first run compiled again what setup had compiled for another venv.
"""

import os as _os
from pathlib import Path as _Path

_os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(_Path(__file__).resolve().parents[2] / ".aes-cache" / "torch_extensions"))

from aes.train.advantages import (
    ADMITTED,
    BROKEN,
    VALID,
    Batch,
    GroupBatcher,
    admission_outcome,
    advantage_samples,
    group_advantages,
    has_spread,
    proposer_reward,
)
from aes.train.dppo import dppo_loss, token_logprobs
from aes.train.episodes import (
    PROPOSER,
    SOLVER,
    Episode,
    Group,
    Sample,
    TrajectoryError,
    Turn,
    episode_from_trajectory,
    load_groups,
    pack_turns,
)
from aes.train.sync import (
    CopyWeights,
    GGUFExport,
    SharedModule,
    VLLMColocated,
    VLLMServer,
    WeightSync,
    build_weight_sync,
)
from aes.train.trainer import DPPOTrainer, PolicyTrainer
from aes.train.backends import SOLVER_BACKENDS, build_trainable_solver  # noqa: E402 - fills DEFAULT_SYNCS

__all__ = [
    "ADMITTED", "BROKEN", "PROPOSER", "SOLVER", "VALID",
    "Batch", "CopyWeights", "DPPOTrainer", "Episode", "GGUFExport", "Group", "GroupBatcher", "PolicyTrainer",
    "Sample", "SharedModule",
    "TrajectoryError", "Turn", "VLLMColocated", "VLLMServer", "WeightSync",
    "SOLVER_BACKENDS", "admission_outcome", "build_trainable_solver", "advantage_samples", "build_weight_sync", "dppo_loss", "episode_from_trajectory",
    "group_advantages", "has_spread", "load_groups", "pack_turns", "proposer_reward", "token_logprobs",
]
