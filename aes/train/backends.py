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
``openai_compatible``  a vLLM server                  ``solver.model`` (HF)       vllm_server
``scripted``           (simulated flywheel: a skill)  -                           -
=====================  =============================  ==========================  ==================

Hosted APIs (``anthropic``, ``openai``) cannot be trained and are refused with a reason.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable

from aes.config import AesConfig, ConfigError
from aes.models import RunBudget, build_model
from aes.train.policy import TrainableSolver, _Lazy
from aes.train.sync import build_weight_sync


@dataclass(frozen=True)
class SolverBackend:
    name: str
    syncs: tuple[str, ...]
    """The weight syncs this backend can do; the first is the default."""
    build: Callable[[AesConfig, RunBudget, object, str], object]
    """(cfg, budget, run paths, weight sync) -> the trainable solver."""


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


def _served(cfg: AesConfig, budget: RunBudget, paths, sync: str) -> TrainableSolver:
    def load():
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_pretrained(cfg.solver.model)

    chat = build_model(cfg.solver, budget)
    return TrainableSolver(cfg, chat, _Lazy(load), build_weight_sync(cfg.trainer, cfg.solver, mode=sync))


def _scripted(cfg: AesConfig, budget: RunBudget, paths, sync: str):
    from aes.train.simulated import SimulatedSolver

    return SimulatedSolver(cfg, build_model(cfg.solver, budget))


SOLVER_BACKENDS = {b.name: b for b in (
    SolverBackend("tiny", ("shared", "copy"), _tiny),
    SolverBackend("local", ("gguf",), _local),
    SolverBackend("openai_compatible", ("vllm_server",), _served),
    SolverBackend("scripted", ("none",), _scripted),
)}


def build_trainable_solver(cfg: AesConfig, budget: RunBudget, paths):
    """The trainable solver of ``solver.backend`` (``paths``: the run's :class:`~aes.paths.RunPaths`)."""
    backend = SOLVER_BACKENDS.get(cfg.solver.backend)
    if backend is None:
        raise ConfigError(f"solver.backend={cfg.solver.backend} cannot be trained: choose an open solver "
                          f"({', '.join(b for b in SOLVER_BACKENDS if b != 'scripted')}; e.g. solver=local, "
                          "solver=tiny, or solver=qwen served by vLLM)")
    sync = cfg.trainer.weight_sync
    if sync == "auto":
        sync = backend.syncs[0]
    elif sync not in backend.syncs:
        raise ConfigError(f"trainer.weight_sync={sync} does not work with solver.backend={backend.name}: "
                          f"set one of {', '.join(('auto',) + backend.syncs)}")
    return backend.build(cfg, budget, paths, sync)
