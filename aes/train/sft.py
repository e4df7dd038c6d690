"""The cold start: supervised fine-tuning of the policy on stored trajectories (``mode=sft``).

Paper App. H: before self-play the model is fine-tuned on 600 high-quality proposer
trajectories (§4.5: 75 for the human-in-the-loop tasks). ``python -m aes.run mode=sft
trajectories=DIR`` does that here:

1. **Select** (:func:`select_trajectories`): every ATIF trajectory under ``DIR`` at any depth
   (a run dir, its ``trajectories/`` or ``proposer/proposer_trajectories/``, or a folder of
   files from elsewhere), each session once (proposer workspaces hold copies of solver
   attempts), none from ``infra/`` or ``infrastructure_failures/`` (faults are not data).
   Filters (:class:`SFTConfig`): the role (proposer episodes have ``extra.assignment``),
   the proposer outcome (``extra.outcome``, admitted only by default), the solver reward
   (``extra.reward`` >= ``min_reward``), then at most ``max_trajectories``, the newest (by
   their last step's timestamp) or a random draw with the run's seed.
2. **Tokens** (:mod:`aes.train.render`): the stored ids of the policy's own rollouts, or the
   messages of hosted-model trajectories rendered with the policy's chat template; the loss
   mask covers the assistant turns only; turns are packed and truncated at
   ``trainer.max_seq_len`` by the rollout rule (:func:`aes.train.episodes.pack_turns`).
3. **Train** (:meth:`aes.train.trainer.PolicyTrainer.sft_update`): ``epochs`` passes in a
   seeded shuffled order, ``trajectories_per_step`` trajectories per optimizer step, the
   token-mean negative log-likelihood of their assistant tokens, on the DeepSpeed engine of
   the DPPO trainer (same micro-batching under ``trainer.micro_batch_tokens``, same
   ``trainer.deepspeed``), at ``lr`` (default ``trainer.lr``). Each step is logged to
   ``metrics.jsonl`` (``event: sft_step``: loss, tokens, trajectories used).
4. **Save**: the DeepSpeed checkpoint in ``RUN_DIR/checkpoints/`` (the DPPO trainer's format:
   ``TrainableSolver.restore`` / ``DPPOTrainer.load`` resume from it) and, with ``export``,
   the weights in ``RUN_DIR/sft_model/`` as a transformers model (``solver.model`` /
   ``proposer.model`` of an ``openai_compatible`` config can name it: vLLM serves it and DPPO
   loads it) plus, for ``solver.backend=local``, ``sft_model/policy.gguf`` (``solver.model``
   of a local config).

:class:`~aes.config.SFTConfig` (``sft.*``) holds the settings.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import random
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from aes.config import AesConfig, ConfigError, ModelConfig, SFTConfig
from aes.train.episodes import PROPOSER, SOLVER, Sample, TrajectoryError, pack_turns
from aes.train.render import is_proposer, sft_turns
from aes.paths import RunPaths
from aes.rewards import task_reward

log = logging.getLogger(__name__)

SKIP_DIRS = frozenset({"infra", "infrastructure_failures"})
"""Where aes keeps attempts and episodes the infrastructure cut short: never training data."""
NO_TOOL_BACKENDS = ("tiny", "local", "transformers", "hf")
"""Backends whose chat clients have no function calling (the agent uses fenced blocks)."""


# -- selection --------------------------------------------------------------------------


@dataclass
class StoredTrajectory:
    """One trajectory file and what the filters read from it."""

    path: Path
    data: dict[str, Any]
    role: str
    reward: float | None
    """Solver: extra.reward; proposer: None."""
    outcome: str | None
    """Proposer: extra.outcome (broken, valid, admitted); solver: the trial outcome."""
    time: float
    """Last step's timestamp (file mtime if none), for ``select: newest``."""


@dataclass
class Selection:
    """The trajectories that passed the filters and why the others did not."""

    kept: list[StoredTrajectory]
    found: int
    """Distinct trajectories found (outside infrastructure-failure dirs)."""
    skipped: Counter

    def summary(self) -> str:
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(self.skipped.items())) or "none"
        return f"{len(self.kept)} of {self.found} trajectories selected (left out: {why})"


def _timestamp(data: dict[str, Any], path: Path) -> float:
    for step in reversed(data.get("steps") or []):
        stamp = step.get("timestamp")
        if isinstance(stamp, str):
            try:
                return dt.datetime.fromisoformat(stamp).timestamp()
            except ValueError:
                continue
    return path.stat().st_mtime


def find_trajectories(root: Path, skipped: Counter | None = None) -> list[StoredTrajectory]:
    """Every ATIF trajectory under ``root`` once (by session id), outside infrastructure-failure dirs."""
    if not root.exists():
        raise ConfigError(f"trajectories={root} does not exist")
    skipped = Counter() if skipped is None else skipped
    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*.json") if not p.name.startswith("."))
    found, sessions = [], set()
    for path in paths:
        if path != root and SKIP_DIRS & set(path.relative_to(root).parts[:-1]):
            skipped["infrastructure failure"] += 1
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            skipped["unreadable"] += 1
            continue
        if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
            continue  # not a trajectory (calibration.json, eval.json, ...)
        session = data.get("session_id")
        if session is not None and session in sessions:
            skipped["duplicate"] += 1
            continue
        sessions.add(session)
        extra = data.get("extra") or {}
        role = PROPOSER if is_proposer(data) else SOLVER
        reward = task_reward(extra) if role == SOLVER else None
        found.append(StoredTrajectory(path, data, role, float(reward) if isinstance(reward, (int, float)) else None,
                                      extra.get("outcome"), _timestamp(data, path)))
    return found


def select_trajectories(root: str | Path, cfg: SFTConfig, seed: int = 0) -> Selection:
    """The trajectories under ``root`` that pass ``cfg``'s filters (see the module docstring)."""
    skipped: Counter = Counter()
    every = find_trajectories(Path(root), skipped)
    kept = []
    for t in every:
        if cfg.role != "any" and t.role != cfg.role:
            skipped[f"not {cfg.role}"] += 1
        elif t.role == PROPOSER and t.outcome not in cfg.proposer_outcomes:
            skipped[f"proposer outcome not in {cfg.proposer_outcomes}"] += 1
        elif t.role == SOLVER and (t.reward is None or t.reward < cfg.min_reward):
            skipped[f"solver reward < {cfg.min_reward:g} or none"] += 1
        else:
            kept.append(t)
    if cfg.max_trajectories is not None and len(kept) > cfg.max_trajectories:
        if cfg.select == "newest":
            chosen = sorted(kept, key=lambda t: (t.time, str(t.path)), reverse=True)[: cfg.max_trajectories]
        else:
            chosen = random.Random(seed).sample(kept, cfg.max_trajectories)
        skipped[f"over max_trajectories ({cfg.select})"] += len(kept) - len(chosen)
        kept = sorted(chosen, key=lambda t: str(t.path))
    return Selection(kept, len(every), skipped)


# -- training sequences -----------------------------------------------------------------


@dataclass
class SFTExample:
    """The training sequences of one selected trajectory."""

    source: str
    role: str
    samples: list[Sample]
    tokens_from: str
    """ids (the stored token ids) or rendered (the messages through the chat template)."""
    truncated_tokens: int = 0

    @property
    def loss_tokens(self) -> int:
        return sum(s.loss_tokens for s in self.samples)


def tool_format_for(model: ModelConfig, tool_format: str) -> str:
    """``auto`` is fenced for a solver whose client has no function calling (tiny, local)."""
    if tool_format == "auto" and (model.backend in NO_TOOL_BACKENDS or model.use_tools is False):
        return "fenced"
    return tool_format


def build_examples(selection: list[StoredTrajectory], policy: Any, max_seq_len: int, *,
                   tool_format: str = "auto", rerender: bool = False,
                   skipped: Counter | None = None) -> list[SFTExample]:
    """Training sequences of every selected trajectory; ones that cannot be trained are logged,
    counted in ``skipped`` and left out."""
    skipped = Counter() if skipped is None else skipped
    tokenizer = getattr(policy, "tokenizer", None)
    eos = list(getattr(policy, "eos_token_ids", None) or [])
    examples = []
    for t in selection:
        try:
            turns, how = sft_turns(t.data, tokenizer, tool_format=tool_format, eos_token_ids=eos,
                                   rerender=rerender, source=str(t.path))
        except TrajectoryError as exc:
            log.warning("not trainable: %s", exc)
            skipped["not trainable"] += 1
            continue
        samples, truncated = pack_turns(turns, max_seq_len)
        if not samples:
            skipped["no assistant tokens within max_seq_len"] += 1
            continue
        examples.append(SFTExample(str(t.path), t.role, samples, how, truncated))
    return examples


# -- the run ----------------------------------------------------------------------------


class _NoRollout:
    """mode=sft samples nothing: no rollout engine takes the weights during the fine-tuning."""

    def push(self, engine: Any) -> None:
        pass

    def close(self) -> None:
        pass


def load_policy(model: ModelConfig) -> Any:
    """The trainable policy (model and tokenizer) of a solver config, without its rollout engine
    (nothing is sampled here: no llama.cpp engine or vLLM server is started or needed)."""
    backend = model.backend
    if backend == "tiny":
        from aes.models.tiny import tiny_policy

        return tiny_policy(model.model, model.seed if model.seed is not None else 0)
    if backend == "local":
        from aes.models.hf_chat import load_gguf_policy

        return load_gguf_policy(model.model)
    if backend == "openai_compatible":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from aes.models.hf_chat import Policy

        return Policy(AutoModelForCausalLM.from_pretrained(model.model), AutoTokenizer.from_pretrained(model.model),
                      name=model.model)
    raise ConfigError(f"solver.backend={backend} cannot be fine-tuned: choose an open solver "
                      "(solver=local, solver=tiny, or solver=qwen with solver.model a Hugging Face model)")


@dataclass
class ColdStartResult:
    selection: Selection
    examples: list[SFTExample]
    steps: int = 0
    history: list[dict[str, float]] = field(default_factory=list)
    checkpoint: Path | None = None
    exported: list[Path] = field(default_factory=list)


def cold_start(cfg: AesConfig, run_dir: Path, metrics: Any = None, policy: Any = None) -> ColdStartResult:
    """Select, tokenize, fine-tune and save (see the module docstring); ``policy`` defaults to
    the solver's (:func:`load_policy`), ``metrics`` is a :class:`aes.report.metrics.MetricsLogger`."""
    from aes.train.trainer import PolicyTrainer

    if not cfg.trajectories:
        raise ConfigError("mode=sft needs trajectories=DIR: a dir of ATIF trajectories (a run dir, its "
                          "trajectories/ or proposer/proposer_trajectories/)")
    sft = cfg.sft
    selection = select_trajectories(cfg.trajectories, sft, cfg.seed)
    log.info("%s in %s", selection.summary(), cfg.trajectories)
    if not selection.kept:
        raise ConfigError(f"nothing to fine-tune on: {selection.summary()} under trajectories={cfg.trajectories} "
                          f"(filters: role={sft.role}, proposer_outcomes={sft.proposer_outcomes}, "
                          f"min_reward={sft.min_reward})")
    policy = load_policy(cfg.solver) if policy is None else policy
    examples = build_examples(selection.kept, policy, cfg.trainer.max_seq_len,
                              tool_format=tool_format_for(cfg.solver, sft.tool_format), rerender=sft.rerender,
                              skipped=selection.skipped)
    result = ColdStartResult(selection, examples)
    if not examples:
        raise ConfigError(f"nothing to fine-tune on: none of the {len(selection.kept)} selected trajectories "
                          f"has assistant tokens to train ({selection.summary()})")
    by_source = Counter(e.tokens_from for e in examples)
    summary = {"event": "sft_data", "trajectories": len(examples), "found": selection.found,
               "proposer": sum(e.role == PROPOSER for e in examples),
               "solver": sum(e.role == SOLVER for e in examples),
               "from_ids": by_source["ids"], "rendered": by_source["rendered"],
               "loss_tokens": sum(e.loss_tokens for e in examples),
               "truncated_tokens": sum(e.truncated_tokens for e in examples),
               **{f"skipped/{k}": v for k, v in selection.skipped.items()}, "config": asdict(sft)}
    if metrics is not None:
        metrics.log(summary)
    trainer_cfg = replace(cfg.trainer, lr=sft.lr) if sft.lr is not None else cfg.trainer
    trainer = PolicyTrainer(trainer_cfg, policy, _NoRollout())
    rng, used = random.Random(cfg.seed), 0
    try:
        for epoch in range(sft.epochs):
            order = list(examples)
            rng.shuffle(order)
            for i in range(0, len(order), sft.trajectories_per_step):
                chunk = order[i: i + sft.trajectories_per_step]
                stats = trainer.sft_update([s for e in chunk for s in e.samples])
                used += len(chunk)
                row = {"event": "sft_step", "step": result.steps + 1, "epoch": epoch + 1,
                       "trajectories": len(chunk), "trajectories_used": used, **{f"sft/{k}": v for k, v in stats.items()}}
                result.steps += 1
                result.history.append(stats)
                if metrics is not None:
                    metrics.log(row, step=result.steps)
                log.info("sft step %d (epoch %d): loss %.4f over %d tokens of %d trajectories (%d used)",
                         result.steps, epoch + 1, stats["loss"], int(stats["loss_tokens"]), len(chunk), used)
        checkpoints = RunPaths(Path(run_dir)).checkpoints
        result.checkpoint = trainer.save(checkpoints)
        if sft.export:
            result.exported = export_weights(trainer, cfg.solver, run_dir / "sft_model")
    finally:
        trainer.close()
    return result


def export_weights(trainer: Any, model: ModelConfig, directory: Path) -> list[Path]:
    """The trained weights as a transformers model in ``directory`` (``solver.model`` of an
    openai_compatible config) and, for a local solver, as ``directory/policy.gguf``."""
    out = [trainer.export(directory)]
    if model.backend == "local":
        from aes.models.local import resolve_gguf
        from aes.train.gguf_export import export_gguf
        from aes.train.sync import full_parameters

        params = full_parameters(trainer.engine)  # every rank iterates: ZeRO-3 gathers are collective
        if trainer.rank == 0:
            out.append(export_gguf(params, trainer.engine.module.config, resolve_gguf(model.model),
                                   directory / "policy.gguf"))
        else:
            for _ in params:
                pass
    return out
