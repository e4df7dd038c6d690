"""``mode=generate``: proposer episodes against the pool, reported as the paper's Table 2."""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from aes.admission import Validator
from aes.admission.decontam import Decontaminator
from aes.admission.pipeline import AdmissionPipeline
from aes.admission.review import Reviewer
from aes.calibration import Calibrator
from aes.config import AesConfig, ConfigError
from aes.domains import instructions_dir, seeds_dir
from aes.models import ChatModel
from aes.pool import AssignmentLog, EnvRecord, PoolStore
from aes.proposer.assignments import Assignment, make_assignments
from aes.proposer.episode import EpisodeResult, run_episode
from aes.proposer.harness import PromptFeedbackHarness, PromptHarness
from aes.proposer.terminal_harness import TerminalHarness
from aes.proposer.tools import ProposerTools
from aes.proposer.workspace import build_workspace
from aes.rollout import RolloutRunner, read_index
from aes.tasks import find_tasks, load_task

log = logging.getLogger("aes")


@dataclass
class ProposerStack:
    """Everything an episode needs, built once per run."""

    cfg: AesConfig
    run_dir: Path
    pool: PoolStore
    proposer: ChatModel
    rollouts: RolloutRunner
    pipeline: AdmissionPipeline
    tools: ProposerTools

    def harness(self):
        name = self.cfg.harness.name
        if name == "prompt":
            return PromptHarness(self.proposer, self.cfg.harness, self.tools)
        if name == "prompt_feedback":
            return PromptFeedbackHarness(self.proposer, self.cfg.harness, self.tools)
        if name == "terminal":
            return TerminalHarness(self.proposer, self.cfg.harness, self.cfg.agent, self.tools,
                                   self.rollouts.trials.sandbox, self.cfg.sandbox.base_image)
        raise ConfigError(f"unknown harness {name!r}")


def build_stack(cfg: AesConfig, run_dir: Path, proposer: ChatModel, rollouts: RolloutRunner) -> ProposerStack:
    validator = Validator(cfg.sandbox, rollouts.trials, nop_max_reward=cfg.admission.nop_max_reward)
    pipeline = AdmissionPipeline(
        validator,
        Decontaminator.from_dir(cfg.domain.benchmark_instructions, cfg.admission.ngram),
        Reviewer(proposer, cfg.admission) if cfg.admission.review else None,
        Calibrator(cfg.calibration, rollouts),
    )
    tools = ProposerTools(validator, rollouts, cfg.harness.solver_probe_attempts, run_dir / "probes")
    return ProposerStack(cfg, run_dir, PoolStore(run_dir / "pool"), proposer, rollouts, pipeline, tools)


def seed_pool(stack: ProposerStack) -> None:
    """An empty pool gets the domain's seed tasks, admitted as they are."""
    if stack.pool.envs():
        return
    paths = find_tasks([seeds_dir(stack.cfg.domain)])
    for path in paths:
        stack.pool.add(path, name=load_task(path).name, status="admitted", source="seed")
    log.info("seeded the pool with %d task(s) from %s", len(paths), seeds_dir(stack.cfg.domain))


def pick_parents(stack: ProposerStack, n: int, round: int) -> list[EnvRecord]:
    """``n`` admitted envs to build on: the least used as parents first, ties broken at random."""
    envs = stack.pool.envs("admitted")
    if not envs or n <= 0:
        return []
    used = Counter(r["parent_id"] for r in AssignmentLog(stack.pool).rows())
    rng = random.Random(stack.cfg.seed * 1_000_003 + round)
    rng.shuffle(envs)
    ranked = sorted(envs, key=lambda e: used[e.env_id])
    return [ranked[i % len(ranked)] for i in range(n)]


def ensure_rollouts(stack: ProposerStack, envs: list[EnvRecord]) -> list[dict]:
    """Index rows of the current solver on ``envs`` (rolling out those without any)."""
    solver = stack.rollouts.solver_name
    index = stack.rollouts.root / "index.jsonl"
    have = {r["env_id"] for r in read_index(index) if r["solver"] == solver}
    missing = list({e.env_id: e for e in envs if e.env_id not in have}.values())
    if missing:
        log.info("rolling out %s on %d pool env(s) without trajectories", solver, len(missing))
        stack.rollouts.run([e.load() for e in missing], stack.cfg.calibration.initial_attempts)
    ids = {e.env_id for e in envs}
    return [r for r in read_index(index) if r["solver"] == solver and r["env_id"] in ids]


def assign(stack: ProposerStack, n: int, round: int) -> list[Assignment]:
    """``n`` assignments on the least-used admitted envs, from the solver's rollouts on them."""
    parents = pick_parents(stack, n, round)
    rows = ensure_rollouts(stack, parents)
    return make_assignments([(e.env_id, e.name) for e in parents], rows, stack.rollouts.solver_name, round)


def run_assignments(stack: ProposerStack, assignments: list[Assignment], opened: bool = False) -> list[EpisodeResult]:
    """One episode per assignment, ``harness.episodes_at_once`` at a time (``opened``: already logged)."""
    if not opened:
        log_ = AssignmentLog(stack.pool)
        for a in assignments:
            a.assignment_id = log_.open(a.round, a.parent_env_id, a.to_dict())

    def episode(a: Assignment) -> EpisodeResult:
        workspace = build_workspace(stack.run_dir / "proposer" / "workspaces" / a.assignment_id, a, stack.pool,
                                    stack.rollouts.root, instructions_dir(stack.cfg.domain),
                                    stack.run_dir / "proposer", stack.cfg.harness.solver_feedback)
        return run_episode(a, workspace, stack.harness(), stack.pipeline, stack.pool,
                           stack.cfg.harness.max_revisions, stack.run_dir / "proposer")

    with ThreadPoolExecutor(max_workers=max(1, stack.cfg.harness.episodes_at_once)) as pool:
        return list(pool.map(episode, assignments))


def summarize(results: list[EpisodeResult]) -> dict:
    """The paper's Table 2 columns for a set of episodes."""
    n = len(results)
    valid = [r for r in results if r.outcome in ("valid", "admitted")]
    tokens, cost = sum(r.tokens for r in results), sum(r.cost_usd for r in results)
    return {
        "episodes": n,
        "valid_env_rate": len(valid) / n if n else 0.0,
        "valid": len(valid),
        "admitted": sum(r.outcome == "admitted" for r in results),
        "failures_by_stage": dict(Counter(s for r in results for s in r.failed_stages)),
        "mean_revisions": sum(r.revisions for r in results) / n if n else 0.0,
        "tokens": tokens,
        "cost_usd": cost,
        "tokens_per_valid_env": tokens / len(valid) if valid else None,
        "cost_per_valid_env": cost / len(valid) if valid else None,
    }


def generate(cfg: AesConfig, run_dir: Path, proposer: ChatModel, rollouts: RolloutRunner,
             round: int = 0) -> tuple[list[EpisodeResult], dict]:
    stack = build_stack(cfg, run_dir, proposer, rollouts)
    seed_pool(stack)
    assignments = assign(stack, cfg.assignments, round)
    results = run_assignments(stack, assignments)
    summary = summarize(results)
    (run_dir / "generate.json").write_text(json.dumps(
        {"summary": summary, "episodes": [{**r.assignment.to_dict(), "outcome": r.outcome, "env_id": r.env_id,
                                           "revisions": r.revisions, "failed_stages": r.failed_stages,
                                           "tokens": r.tokens, "cost_usd": r.cost_usd} for r in results]},
        indent=2) + "\n")
    return results, summary
