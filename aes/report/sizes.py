"""The run's effective sizes, in one block logged at start.

The group files hold the paper's numbers and ``conf/scale/`` shrinks them for the embedded
model, so what a command line composes to is not obvious from the line: this block says it.
"""

from __future__ import annotations

from aes.config import AesConfig


def _gib(mib: float) -> str:
    return f"{mib / 1024:g} GiB"


def _duration(seconds: float) -> str:
    if seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def _turns(limit: int | None, bound: str) -> str:
    return f"no limit, {bound}" if limit is None else f"{limit}, {bound}"


def describe_sizes(cfg: AesConfig) -> str:
    """Rounds, attempts, turns, tokens, pool and sandbox sizes of ``cfg``, one per line."""
    fly, trainer, harness, cal, sandbox = cfg.flywheel, cfg.trainer, cfg.harness, cfg.calibration, cfg.sandbox
    budget = f"{_duration(harness.episode_timeout_sec)} budget"
    proposer_turns = (_turns(harness.max_turns, budget) if harness.name == "terminal"
                      else f"one generation per draft (harness={harness.name}), {budget}")
    rows = [
        ("rounds", f"{fly.rounds} generations x {fly.proposer_interval} solver updates "
                   f"= {fly.rounds * fly.proposer_interval} updates"),
        ("assignments per round", f"{fly.assignments_per_round}"),
        ("proposer samples", f"{fly.proposer_samples} per assignment"
                             + (" (shared policy)" if fly.shared_policy else "")),
        ("proposer interval", f"k = {fly.proposer_interval} solver updates; pool review every "
                              f"{trainer.updates_per_refresh}"),
        ("parent rollouts", f"{fly.parent_attempts or cal.initial_attempts} attempts per assignment's parent"),
        ("calibration attempts", f"{cal.initial_attempts}, {cal.expanded_attempts} near a band edge"),
        ("training batch", f"{trainer.envs_per_update} envs x {trainer.attempts_per_env} attempts"),
        ("solver agent turns", _turns(cfg.agent.max_turns, "task's agent timeout")),
        ("proposer turns", proposer_turns),
        ("revisions", f"{harness.max_revisions} per assignment"),
        ("solver max tokens", f"{cfg.solver.max_tokens} per turn"),
        ("context length", f"solver {cfg.solver.context_length}, proposer {cfg.proposer.context_length}"),
        ("max_seq_len", f"{trainer.max_seq_len} (micro-batch {trainer.micro_batch_tokens} tokens)"),
        ("pool size", f"{fly.pool_size}"),
        ("solver sandbox", f"{sandbox.default_cpus:g} CPU / {_gib(sandbox.default_memory_mb)} "
                           f"(where task.toml sets none), {sandbox.concurrency} in parallel"),
        ("proposer sandbox", f"{harness.cpus:g} CPU / {_gib(harness.memory_mb)}, "
                             f"{harness.episodes_at_once} in parallel"),
    ]
    width = max(len(name) for name, _ in rows)
    head = f"effective sizes (mode={cfg.mode}, proposer={cfg.proposer.name}, solver={cfg.solver.name}):"
    return "\n".join([head, *(f"  {name:<{width}}  {value}" for name, value in rows)])
