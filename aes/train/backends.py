"""The solver backends that can be trained, in one registry.

Each names what serves its rollouts (the chat model), what DeepSpeed trains (the policy) and how
new weights reach the rollout engine (the weight syncs it allows; the first is what
``trainer.weight_sync=auto`` picks). A ``trainer.weight_sync`` the backend cannot do is refused
with the ones it can.

=====================  =============================  ==========================  ==================
``solver.backend``     rollouts                       policy                      weight syncs
=====================  =============================  ==========================  ==================
``tiny``               the tiny model, in process     the same module             shared, copy
``local``              llama.cpp on the GGUF file     transformers copy of it     gguf
``openai_compatible``  vLLM servers                   ``solver.model`` (HF)       vllm_server,
                       or llama.cpp servers (GGUF)    or its GGUF, dequantised    vllm_reload,
                                                                                  llamacpp_server
``scripted``           (simulated flywheel: a skill)  -                           -
=====================  =============================  ==========================  ==================

``openai_compatible`` with ``weight_sync=auto`` takes ``llamacpp_server`` when ``solver.model`` is a
GGUF file served by llama.cpp (what ``cluster.backend=llamacpp`` serves), else for vLLM ``vllm_server``
(NCCL) from a trainer with a GPU and ``vllm_reload`` (an in-place reload) from one without. The model
is loaded for training with the rope-scaling overrides it is served with (:mod:`aes.models.families`).

This module is the top of ``aes.train``: it imports policy, sync and trainer, none of them imports it
(``trainer.weight_sync=auto`` reaches it through :data:`aes.train.sync.DEFAULT_SYNCS`, filled here), and
``aes.cluster`` sits above it (rank 0's announcer joins :data:`SOLVER_WRAPPERS`). Hosted APIs
(``anthropic``, ``openai``) cannot be trained and are refused with a reason. With several trainer
ranks (``cluster``), rank 0's solver announces every update to the others (:mod:`aes.cluster.distributed`).
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from typing import Callable

import torch

from aes.config import AesConfig, ConfigError, ModelConfig
from aes.models import RunBudget, build_model
from aes.train.policy import TrainableSolver, _Lazy
from aes.train.sync import DEFAULT_SYNCS, build_weight_sync

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SolverBackend:
    name: str
    syncs: tuple[str, ...]
    """The weight syncs this backend can do; the first is the default."""
    build: Callable[[AesConfig, RunBudget, object, str], object]
    """(cfg, budget, run paths, weight sync) -> the trainable solver."""
    pick: Callable[[ModelConfig], str] | None = None
    """The sync ``auto`` means for a solver config (default: the first of ``syncs``)."""

    def default_sync(self, solver: ModelConfig) -> str:
        return self.pick(solver) if self.pick is not None else self.syncs[0]


def _tiny(cfg: AesConfig, budget: RunBudget, paths, sync: str) -> TrainableSolver:
    chat = build_model(cfg.solver, budget)
    if sync == "copy":  # the trainer trains its own copy; the rollout module gets the weights after each step
        from aes.models.hf_chat import Policy

        policy = Policy(model=copy.deepcopy(chat.policy.model), tokenizer=chat.policy.tokenizer,
                        name=f"{chat.policy.name} (trained copy)")
        return TrainableSolver(cfg, chat, policy, build_weight_sync(cfg.trainer, cfg.solver, rollout=chat.policy.model,
                                                                    mode=sync))
    return TrainableSolver(cfg, chat, chat.policy, build_weight_sync(cfg.trainer, cfg.solver, rollout=chat.policy,
                                                                     mode=sync))


def _local(cfg: AesConfig, budget: RunBudget, paths, sync: str) -> TrainableSolver:
    from aes.models.hf_chat import load_gguf_policy

    chat = build_model(cfg.solver, budget)
    weights = build_weight_sync(cfg.trainer, cfg.solver, rollout=chat, out_dir=paths.gguf, mode=sync)
    return TrainableSolver(cfg, chat, _Lazy(lambda: load_gguf_policy(cfg.solver.model)), weights)


def is_gguf(model: str) -> bool:
    """Whether ``model`` names a GGUF file (a path ending in .gguf, or the embedded SmolLM2)."""
    from aes.models.local import SMOLLM2_ALIASES

    return model.strip().lower().endswith(".gguf") or model.strip().lower() in SMOLLM2_ALIASES


def load_served_policy(cfg: AesConfig):
    """The trainable copy of a served solver: its GGUF dequantised, or ``solver.model`` loaded with the
    rope-scaling overrides the server gets (:mod:`aes.models.families`), so it trains at the context it
    is sampled at."""
    if is_gguf(cfg.solver.model):  # the embedded model (llama.cpp's GGUF, or vLLM's export of it)
        from aes.models.hf_chat import load_gguf_policy

        return load_gguf_policy(cfg.solver.model)
    from transformers import AutoModelForCausalLM

    from aes.models.families import trainer_overrides

    overrides = trainer_overrides(cfg.solver, cfg.cluster)
    if overrides:
        log.info("loading %s for training with %s", cfg.solver.model, overrides)
    return AutoModelForCausalLM.from_pretrained(cfg.solver.model, dtype=torch.float32, **overrides)


def _served(cfg: AesConfig, budget: RunBudget, paths, sync: str) -> TrainableSolver:
    def load():
        return load_served_policy(cfg)

    chat = build_model(cfg.solver, budget)
    out_dir = paths.checkpoints / "vllm" if sync == "vllm_reload" else paths.gguf
    weights = build_weight_sync(cfg.trainer, cfg.solver, rollout=chat, out_dir=out_dir, mode=sync)
    return TrainableSolver(cfg, chat, _Lazy(load), weights)


def _served_sync(solver: ModelConfig) -> str:
    """llama.cpp servers for a GGUF; vLLM: NCCL from a GPU trainer, else the in-place reload."""
    if is_gguf(solver.model) and solver.engine != "vllm":
        return "llamacpp_server"
    return "vllm_server" if torch.cuda.is_available() else "vllm_reload"


def _scripted(cfg: AesConfig, budget: RunBudget, paths, sync: str):
    from aes.train.simulated import SimulatedSolver

    return SimulatedSolver(cfg, build_model(cfg.solver, budget))


SOLVER_BACKENDS = {b.name: b for b in (
    SolverBackend("tiny", ("shared", "copy"), _tiny),
    SolverBackend("local", ("gguf",), _local),
    SolverBackend("openai_compatible", ("vllm_server", "vllm_reload", "llamacpp_server"), _served, _served_sync),
    SolverBackend("scripted", ("none",), _scripted),
)}
DEFAULT_SYNCS.update({name: b.default_sync for name, b in SOLVER_BACKENDS.items()})

SOLVER_WRAPPERS: list[Callable[[object], object]] = []
"""Applied to every trainable solver built here, in order (the job registers rank 0's announcer when
it leads several trainer ranks: :func:`aes.cluster.distributed.init`)."""


def build_trainable_solver(cfg: AesConfig, budget: RunBudget, paths):
    """The trainable solver of ``solver.backend`` (``paths``: the run's :class:`~aes.paths.RunPaths`)."""
    backend = SOLVER_BACKENDS.get(cfg.solver.backend)
    if backend is None:
        raise ConfigError(f"solver.backend={cfg.solver.backend} cannot be trained: choose an open solver "
                          f"({', '.join(b for b in SOLVER_BACKENDS if b != 'scripted')}; e.g. solver=local, "
                          "solver=tiny, or solver=qwen served by vLLM)")
    sync = cfg.trainer.weight_sync
    if sync == "auto":
        sync = backend.default_sync(cfg.solver)
    elif sync not in backend.syncs:
        raise ConfigError(f"trainer.weight_sync={sync} does not work with solver.backend={backend.name}: "
                          f"set one of {', '.join(('auto',) + backend.syncs)}")
    solver = backend.build(cfg, budget, paths, sync)
    for wrap in SOLVER_WRAPPERS:
        solver = wrap(solver)
    return solver
