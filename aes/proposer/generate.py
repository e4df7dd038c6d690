"""``mode=generate``: proposer episodes against the pool, reported as the paper's Table 2."""

from __future__ import annotations

import json
import logging
import random
import statistics
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from aes.admission.pipeline import AdmissionPipeline
from aes.config import AesConfig, ConfigError
from aes.domains import instructions_dir, seeds_dir
from aes.models import ChatModel
from aes.pool import AssignmentLog, EnvRecord, PoolStore
from aes.proposer.assignments import Assignment, SolverProfile, make_assignments
from aes.proposer.episode import EpisodeResult, run_episode
from aes.proposer.harness import PromptFeedbackHarness, PromptHarness
from aes.proposer.instructions import workspace_docs
from aes.proposer.terminal_harness import TerminalHarness
from aes.proposer.tools import ProposerTools
from aes.proposer.workspace import build_workspace
from aes.paths import RunPaths
from aes.report.stats import rate
from aes.rollout import RolloutRunner, latest_rows, read_index
from aes.tasks import find_tasks, load_task

log = logging.getLogger("aes")


@dataclass
class ProposerStack:
    """Everything an episode needs, built once per run by :mod:`aes.compose` (which owns the pool
    and the admission pipeline and hands them in)."""

    cfg: AesConfig
    paths: RunPaths
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
        if name == "scripted":
            from aes.proposer.scripted import ScriptedHarness

            return ScriptedHarness(self.proposer, self.cfg.harness)
        raise ConfigError(f"unknown harness {name!r}")


def seed_pool(stack: ProposerStack) -> None:
    """An empty pool gets the domain's seed tasks, admitted as they are."""
    if stack.pool.envs():
        return
    paths = find_tasks([seeds_dir(stack.cfg.domain)])
    for path in paths:
        stack.pool.add(path, name=load_task(path).name, status="admitted", source="seed")
    log.info("seeded the pool with %d task(s) from %s", len(paths), seeds_dir(stack.cfg.domain))


def pick_parents(stack: ProposerStack, n: int, round: int, first: list[str] | None = None) -> list[EnvRecord]:
    """``n`` envs to build on: those in ``first`` (any status), then the least-used admitted
    envs as parents, ties broken at random."""
    if n <= 0:
        return []
    chosen = [env for env in (stack.pool.get(i) for i in (first or [])[:n]) if env is not None]
    envs = stack.pool.envs("admitted")
    if not envs:
        return chosen
    used = Counter(r["parent_id"] for r in AssignmentLog(stack.pool).rows())
    rng = random.Random(stack.cfg.seed * 1_000_003 + round)
    rng.shuffle(envs)
    ranked = sorted(envs, key=lambda e: used[e.env_id])
    return chosen + [ranked[i % len(ranked)] for i in range(n - len(chosen))]


def fresh_rows(stack: ProposerStack, envs: list[EnvRecord], attempts: int) -> dict[str, dict]:
    """The solver's newest rollouts on ``envs`` (merged index rows by env id): envs whose newest
    rows come from an older policy than the current one are rolled out again first."""
    runner = stack.rollouts
    rows = latest_rows(read_index(runner.index), runner.solver_name)
    stale = list({e.env_id: e for e in envs
                  if e.env_id not in rows or rows[e.env_id].get("policy_version", 0) < runner.policy_version}.values())
    if stale:
        log.info("rolling out %s (policy version %d) on %d parent env(s) for the assignments", runner.solver_name,
                 runner.policy_version, len(stale))
        runner.at(f"{runner.batch}-assign" if runner.batch else "assign").run(
            [e.load() for e in stale], attempts, show_progress=False, label="parent rollouts")
        rows = latest_rows(read_index(runner.index), runner.solver_name)
    return {e.env_id: rows[e.env_id] for e in envs if e.env_id in rows}


def assign(stack: ProposerStack, n: int, round: int, first: list[str] | None = None) -> list[Assignment]:
    """``n`` assignments, from the solver's newest rollouts: the envs in ``first`` (a refresh's
    replacements) before the least-used admitted envs."""
    parents = pick_parents(stack, n, round, first)
    rows = fresh_rows(stack, parents, stack.cfg.flywheel.parent_attempts or stack.cfg.calibration.initial_attempts)
    return make_assignments([(e.env_id, e.name) for e in parents], list(rows.values()),
                            stack.rollouts.solver_name, round, SolverProfile.from_config(stack.cfg))


def run_assignments(stack: ProposerStack, assignments: list[Assignment], opened: bool = False,
                    calibrate_in_episode: bool = True) -> list[EpisodeResult]:
    """One episode per assignment, ``harness.episodes_at_once`` at a time (``opened``: already logged).
    ``calibrate_in_episode``: see :func:`~aes.proposer.episode.run_episode` (False: Table 2's protocol)."""
    if not opened:
        log_ = AssignmentLog(stack.pool)
        for a in assignments:
            a.assignment_id = log_.open(a.round, a.parent_env_id, a.to_dict())

    def episode(a: Assignment) -> EpisodeResult:
        workspace = build_workspace(stack.paths.workspaces / a.assignment_id, a, stack.pool,
                                    stack.rollouts.root, instructions_dir(stack.cfg.domain),
                                    stack.paths.proposer, stack.cfg.harness.solver_feedback,
                                    workspace_docs(stack.cfg, calibrate_in_episode))
        return run_episode(a, workspace, stack.harness(), stack.pipeline, stack.pool,
                           stack.cfg.harness.max_revisions, stack.paths.proposer, calibrate_in_episode,
                           stack.cfg.harness.solver_feedback)

    with ThreadPoolExecutor(max_workers=max(1, stack.cfg.harness.episodes_at_once)) as pool:
        return list(pool.map(episode, assignments))


def summarize(results: list[EpisodeResult]) -> dict:
    """The paper's Table 2 columns for a set of episodes, each judged on the env it finally submitted:
    valid = admission checks 1-4 (it builds, its reference scores 1, doing nothing < 0.5: §4.1's
    definition, no calibration in it), admitted = checks 1-6 (also decontamination and review),
    calibrated = also in the calibration band (reported beside validity); rates with 95% Wilson
    intervals; tokens and USD of every proposer-side model call (review included) per valid env;
    Fig. 5's statistics of the valid envs. Table 8 (App. C.1): accepted = checks 1-4 as the domain
    runs them (it initializes, its reference earns 1, doing nothing earns 0 where the domain demands
    it, a second fresh start is alike and the reference passes again), neither review nor
    calibration; the mean generation rounds of the accepted episodes (the first draft is round 1).
    With no episode (a static pool, a full pool) the rates are None — "no episodes", never a 0%."""
    n = len(results)
    valid = [r for r in results if r.checks_1_4]
    domain_accepted = valid  # App. C.1 counts checks 1-4 as the domain runs them (no review, no calibration)
    tokens, cost = sum(r.tokens for r in results), sum(r.cost_usd for r in results)
    stats = {key: [r.stats[key] for r in valid if r.stats.get(key) is not None]
             for key in ("data_files", "solver_turns", "solver_success")}
    return {
        "episodes": n,
        "valid_env_rate": len(valid) / n if n else None,
        "valid": len(valid),
        "valid_ci": rate(len(valid), n),
        "accepted": sum(r.checks_1_6 for r in results),
        "accepted_ci": rate(sum(r.checks_1_6 for r in results), n),
        "calibrated": sum(r.calibrated for r in results),
        "calibrated_ci": rate(sum(r.calibrated for r in results), n),
        "failures_by_stage": dict(Counter(s for r in results for s in r.failed_stages)),
        "mean_revisions": sum(r.revisions for r in results) / n if n else None,
        "domain_accepted": len(domain_accepted),
        "domain_accepted_ci": rate(len(domain_accepted), n),
        "domain_accepted_rounds": (statistics.fmean(r.revisions + 1 for r in domain_accepted)
                                   if domain_accepted else None),
        "tokens": tokens,
        "cost_usd": cost,
        "review_cost_usd": sum(r.review_cost_usd for r in results),
        "tokens_per_valid_env": tokens / len(valid) if valid else None,
        "cost_per_valid_env": cost / len(valid) if valid else None,
        "fig5": {key: {"mean": statistics.fmean(v), "median": statistics.median(v), "n": len(v)} if v else None
                 for key, v in stats.items()},
    }


PROTOCOL = {"valid": "checks 1-4 (build, reference = 1, do-nothing below the threshold)",
            "accepted": "checks 1-6 (also decontamination and review)",
            "domain_accepted": "checks 1-4 as the domain runs them (Table 8, App. C.1)",
            "calibration": "after the episode, on the env it finally submitted; no revision answers it"}
"""How ``mode=generate`` counts (Table 2 §4.1, Table 8 App. C.1; F.1: calibration is not part of validity)."""


def generate(cfg: AesConfig, stack: ProposerStack, round: int = 0) -> tuple[list[EpisodeResult], dict]:
    """``cfg.assignments`` episodes on the run's pool, as the paper's Table 2 and Table 8 count them:
    revisions answer checks 1-6, and the env each episode finally submitted is calibrated once after
    it (reported beside validity, never part of it); writes ``generate.json``."""
    seed_pool(stack)
    assignments = assign(stack, cfg.assignments, round)
    results = run_assignments(stack, assignments, calibrate_in_episode=False)
    summary = summarize(results)
    (stack.paths.root / "generate.json").write_text(json.dumps(
        {"proposer": cfg.proposer.name, "harness": cfg.harness.name, "domain": cfg.domain.name,
         "solver": cfg.solver.name, "protocol": PROTOCOL, "summary": summary,
         "episodes": [{**r.assignment.to_dict(), "outcome": r.outcome, "env_id": r.env_id,
                       "revisions": r.revisions, "rounds": r.revisions + 1, "failed_stages": r.failed_stages,
                       "checks_1_4": r.checks_1_4, "checks_1_6": r.checks_1_6,
                       "calibrated": r.calibrated, "stats": r.stats, "tokens": r.tokens, "cost_usd": r.cost_usd,
                       "review_cost_usd": r.review_cost_usd}
                      for r in results]},
        indent=2) + "\n")
    return results, summary
