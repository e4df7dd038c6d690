"""The AutoEnvScaling loop, one short method per stage.

    seed pool -> solver rollouts -> assignments -> propose (admission, calibration, pool)
              -> DPPO updates -> refresh (every trainer.updates_per_refresh) -> next round

State lives in the run dir: the pool database (envs, verdicts, assignments, the loop's
round/update counters), trajectory files, trainer checkpoints and metrics.jsonl. Rerun
with the same run dir to resume: finished rounds, episodes and attempts are not redone,
and nothing admitted is lost or duplicated.
"""

from __future__ import annotations

import logging
import random
import statistics
from pathlib import Path

from aes.calibration import ADMIT, decide
from aes.config import AesConfig
from aes.models import ChatModel, RunBudget, check_models
from aes.pool import AssignmentLog
from aes.proposer.assignments import Assignment
from aes.proposer.episode import EpisodeResult
from aes.proposer.generate import assign, build_stack, run_assignments, seed_pool, summarize
from aes.report.html import write_report
from aes.report.metrics import MetricsLogger
from aes.rollout import RolloutRunner, read_index
from aes.sandbox import TrialRunner
from aes.train.advantages import has_spread
from aes.train.policy import TrainableSolver, build_trainable_solver

log = logging.getLogger("aes")
DIFFICULTY = {"starter": 0, "easy": 1, "medium": 2, "hard": 3}


class Flywheel:
    def __init__(self, cfg: AesConfig, run_dir: Path):
        self.cfg, self.run_dir = cfg, run_dir
        self.budget = RunBudget(cfg.budget)
        self.solver: TrainableSolver = build_trainable_solver(cfg, self.budget, run_dir)
        proposer = self.solver.chat if cfg.flywheel.shared_policy else self.solver.proposer(cfg, self.budget)
        self._check_models(proposer)
        self.trials = TrialRunner(cfg.sandbox)
        self.rollouts = RolloutRunner(self.solver.chat, cfg.agent, self.trials, run_dir, cfg.sandbox.concurrency,
                                      infra_limit=cfg.infra_failure_limit)
        self.stack = build_stack(cfg, run_dir, proposer, self.rollouts)
        self.pool = self.stack.pool
        self.metrics = MetricsLogger(cfg.logger, run_dir)
        self.round = self.pool.get_meta("flywheel.round", 0)
        self.updates = self.pool.get_meta("flywheel.updates", 0)

    def _check_models(self, proposer: ChatModel) -> None:
        """Health-check the solver and the proposer (also the reviewer) before any container
        starts; on a failure close them and stop with every server that cannot serve."""
        try:
            check_models(self.solver.chat, proposer)
        except BaseException:
            if proposer is not self.solver.chat:
                proposer.close()
            self.solver.close()
            raise

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> None:
        seed_pool(self.stack)
        if self.updates:
            self.solver.restore(self.run_dir / "checkpoints")
        while self.round < self.cfg.flywheel.rounds:
            log.info("round %d of %d (%d DPPO updates so far)", self.round + 1, self.cfg.flywheel.rounds,
                     self.updates)
            results = self.propose(self.assignments())
            train = [self.train_step() for _ in range(self.cfg.flywheel.updates_per_round)]
            self.log_round(results, train)
            self.round += 1
            self.pool.set_meta("flywheel.round", self.round)
        write_report(self.run_dir, self.pool.envs(), f"aes run {self.run_dir.name}")

    def assignments(self) -> list[Assignment]:
        """This round's assignments (the same ones again when a killed round is resumed)."""
        saved = self.pool.get_meta(f"flywheel.round.{self.round}.assignments")
        if saved is not None:
            closed = {r["assignment_id"] for r in AssignmentLog(self.pool).rows(self.round) if r["status"] == "closed"}
            return [Assignment(**a) for a in saved if a["assignment_id"] not in closed]
        room = self.cfg.flywheel.pool_size - len(self.pool.envs("admitted"))
        n = min(self.cfg.flywheel.assignments_per_round, max(room, 0))
        picked = assign(self.stack, n, self.round)  # rolls the solver out on the chosen parents
        todo = [Assignment(**{**a.to_dict(), "group": f"r{self.round}-{i}"})
                for i, a in enumerate(picked) for _ in range(self.cfg.flywheel.proposer_samples)]
        log_ = AssignmentLog(self.pool)
        for a in todo:
            a.assignment_id = log_.open(a.round, a.parent_env_id, a.to_dict())
        self.pool.set_meta(f"flywheel.round.{self.round}.assignments", [a.to_dict() for a in todo])
        return todo

    def propose(self, assignments: list[Assignment]) -> list[EpisodeResult]:
        """Proposer episodes; admission and calibration put their envs in the pool."""
        return run_assignments(self.stack, assignments, opened=True) if assignments else []

    def train_step(self) -> dict | None:
        """One DPPO update on fresh solver groups with reward spread (and proposer groups)."""
        groups, collected = self.solver_groups()
        if self.cfg.flywheel.shared_policy and self.cfg.flywheel.train_proposer:
            groups += self.solver.proposer_groups(self.run_dir, self.round)
        if not groups:
            log.warning("no DPPO update: none of the %d groups drawn had rewards that differ between "
                        "attempts (no reward spread), so there is nothing to learn from this time", collected)
            self.metrics.log({"event": "no_update", "round": self.round, "groups_collected": collected})
            return None
        stats = self.solver.update(groups, collected)
        self.updates += 1
        self.solver.save(self.run_dir / "checkpoints")
        self.pool.set_meta("flywheel.updates", self.updates)
        self.metrics.log({"event": "update", "round": self.round, "update": self.updates,
                          "solver_reward_mean": stats.get("reward_mean"),
                          **{f"dppo/{k}": v for k, v in stats.items()}}, step=self.updates)
        if self.updates % self.cfg.trainer.updates_per_refresh == 0:
            self.refresh()
        return stats

    def training_envs(self) -> list:
        """Admitted envs in the order to draw them: those where the solver's rewards varied
        before first, then those it partly solved, then unseen ones (easiest declared
        difficulty first: a curriculum for a weak solver on a fresh pool), then flat ones."""
        rows = {r["env_id"]: r for r in read_index(self.rollouts.root / "index.jsonl")
                if r["solver"] == self.rollouts.solver_name}

        def tier(env) -> tuple[int, int]:
            row = rows.get(env.env_id)
            if row is None or row.get("mean") is None:
                return 2, DIFFICULTY.get(str(env.load().spec.metadata.get("difficulty", "")).lower(), 4)
            if (row.get("std") or 0.0) > 0.0:
                return 0, 0
            return (1, 0) if 0.0 < row["mean"] < 1.0 else (3, 0)

        envs = self.pool.envs("admitted")
        random.Random(self.cfg.seed * 7919 + self.updates).shuffle(envs)
        return sorted(envs, key=tier)

    def solver_groups(self) -> tuple[list, int]:
        """Draw envs and roll out ``attempts_per_env`` attempts each until enough groups vary."""
        trainer = self.cfg.trainer
        envs = self.training_envs()
        runner = RolloutRunner(self.solver.chat, self.cfg.agent, self.trials,
                               self.run_dir / "train" / f"u{self.updates + 1:04d}", self.cfg.sandbox.concurrency,
                               infra_limit=self.cfg.infra_failure_limit)
        kept, collected = [], 0
        for draw in range(self.cfg.flywheel.max_group_draws):
            batch = envs[draw * trainer.envs_per_update:(draw + 1) * trainer.envs_per_update]
            if not batch or len(kept) >= trainer.envs_per_update:
                break
            runner.run([e.load() for e in batch], trainer.attempts_per_env)
            groups = self.solver.groups_from(runner.root)
            collected = len(groups)
            kept = [g for g in groups if has_spread(g.rewards)][: trainer.envs_per_update]
        return kept, collected

    def refresh(self) -> None:
        """Rerun the solver on the pool; retire envs that left the band (keeping ``min_pool``)."""
        runner = RolloutRunner(self.solver.chat, self.cfg.agent, self.trials,
                               self.run_dir / "refresh" / f"u{self.updates:04d}", self.cfg.sandbox.concurrency,
                               infra_limit=self.cfg.infra_failure_limit)
        admitted = self.pool.envs("admitted")
        envs = runner.run([e.load() for e in admitted], self.cfg.calibration.initial_attempts)
        outside = []
        for env in admitted:
            decision = decide(envs[env.env_id].rewards, self.cfg.calibration)
            if decision.verdict != ADMIT:
                outside.append((abs((decision.mean or 0.0) - 0.5), env.env_id, decision))
        retire = sorted(outside, reverse=True)[: max(0, len(admitted) - self.cfg.flywheel.min_pool)]
        for _, env_id, decision in retire:
            self.pool.set_status(env_id, "retired", mean_reward=decision.mean, std_reward=decision.std)
        log.info("refresh after update %d: %d of %d envs left the band, %d retired (replacements are "
                 "assigned from the newest rollouts)", self.updates, len(outside), len(admitted), len(retire))
        self.metrics.log({"event": "refresh", "update": self.updates, "left_band": len(outside),
                          "retired": len(retire)})

    def log_round(self, results: list[EpisodeResult], train: list[dict | None]) -> None:
        summary = summarize(results)
        rewards = [s["reward_mean"] for s in train if s and s.get("reward_mean") is not None]
        spent = self.budget.summary()
        self.metrics.log({
            "event": "round", "round": self.round + 1, "updates": self.updates,
            "valid_env_rate": summary["valid_env_rate"], "admitted": summary["admitted"],
            "pool_size": len(self.pool.envs("admitted")),
            "solver_reward_mean": statistics.fmean(rewards) if rewards else None,
            "dppo/masked_fraction": next((s.get("masked_fraction") for s in reversed(train) if s), None),
            "cost_per_valid_env": summary["cost_per_valid_env"], "tokens_per_valid_env": summary["tokens_per_valid_env"],
            "failures_by_stage": summary["failures_by_stage"], "cost_usd": spent["cost_usd"],
            "tokens": spent["tokens"], "episodes": summary["episodes"],
        }, step=self.updates)

    def close(self) -> None:
        self.metrics.close()
        self.solver.close()
