"""The AutoEnvScaling loop as the paper runs it (§3, App. G.1), one short method per stage.

    seed pool
    every step:      solver rollouts on the pool -> one DPPO update of the solver
    every k steps:   (a generation) fresh rollouts on the parents -> assignments -> proposer
                     episodes -> admission -> calibration -> pool; the proposer's trajectories
                     are trained once, in the next update; then the proposer reflects
    every R updates: refresh: the updated solver is calibrated again on the pool, envs that
                     left the band are retired and replaced by the next generation

k is ``flywheel.proposer_interval``, R ``trainer.updates_per_refresh``; a run is
``flywheel.rounds`` generations of k steps. Every rollout lands in one index with the policy
version (updates applied) that produced it; assignments read the newest.

State lives in the run dir: the pool database (envs, verdicts, assignments with each finished
episode's result, the loop's counters), trajectory files, trainer checkpoints, what the run spent
(``spend.json``) and metrics.jsonl. Resume a run (``python -m aes.run resume=RUN_DIR``) after
Ctrl-C, a kill or a crash: finished generations, episodes and attempts are not redone, the
round that was cut short counts every episode, token and dollar it had, and nothing admitted
is lost or duplicated. Between its stages the loop stops when Ctrl-C or SIGTERM asked it to
(:mod:`aes.interrupt`).
"""

from __future__ import annotations

import logging
import math
import random
import statistics

from aes import interrupt
from aes.calibration import ADMIT
from aes.compose import FlywheelParts
from aes.config import ConfigError
from aes.generation import round_results, run_episodes
from aes.pool import AssignmentLog
from aes.proposer.assignments import Assignment
from aes.proposer.episode import EpisodeResult
from aes.proposer.generate import assign, seed_pool, summarize
from aes.report.clock import StageClock
from aes.report.html import write_report
from aes.rollout import AttemptRecord, EnvRollouts, latest_rows, read_index
from aes.train.advantages import has_spread
from aes.train.step import train_step

log = logging.getLogger("aes")
DIFFICULTY = {"starter": 0, "easy": 1, "medium": 2, "hard": 3}
OVERSAMPLE = 2
"""With carried rollouts, envs in flight per update's worth of groups (the paper oversamples)."""
PROPOSER_GROUP_UPDATES = "flywheel.proposer_group_updates"
"""Pool meta: proposer group key -> how many updates trained it (``proposer/trained_once`` reads it)."""


class Flywheel:
    def __init__(self, parts: FlywheelParts):
        self.parts = parts
        self.cfg, self.paths = parts.cfg, parts.paths
        self.solver, self.rollouts, self.pool = parts.solver, parts.rollouts, parts.pool
        self.stack, self.metrics = parts.stack, parts.metrics
        self.pool.capacity = self.cfg.flywheel.pool_size  # admitted envs at most; the rest wait for room
        self.interval = max(1, self.cfg.flywheel.proposer_interval)
        self.step = self.pool.get_meta("flywheel.step", 0)
        """Solver steps taken (an update, or a step whose groups had no reward spread)."""
        self.updates = self.pool.get_meta("flywheel.updates", 0)
        """DPPO updates applied: the policy version of every rollout made now."""
        self.in_flight: list = []
        """Batches of solver attempts still running (carried rollouts)."""
        self.ready: list = []
        """Complete groups with reward spread beyond what the last update needed."""
        self.carried = 0
        """Attempts still running when the last update started."""
        if self.cfg.flywheel.carry_unfinished:
            if self.cfg.sandbox.executor == "ray" and not self.follows_server_versions():
                from aes.config import ConfigError

                raise ConfigError(
                    "flywheel.carry_unfinished with sandbox.executor=ray needs a solver served by vLLM "
                    "(solver.engine=vllm, or cluster.backend=vllm): an attempt on a Ray worker learns of the "
                    "updates made while it runs only from the vLLM server's policy version; with another "
                    "solver its later turns would record a stale version. Set flywheel.carry_unfinished=false")
            self.rollouts.max_policy_span = self.cfg.flywheel.carry_max_updates
        self.reused = 0
        """Groups of the last update taken from rollouts the policy had already made (see unused_groups)."""
        self.no_episodes = ""
        """Why the last generation opened no assignment (a static pool, a full pool), for its round row."""
        self.clock = StageClock()
        """Wall seconds per stage, into each round's row (``seconds/<stage>``)."""
        pipeline = getattr(self.stack, "pipeline", None)
        if pipeline is not None:
            pipeline.clock = self.clock

    def follows_server_versions(self) -> bool:
        """Whether the solver's clients on other machines read the policy version from its vLLM servers."""
        solver, cluster = self.cfg.solver, self.cfg.cluster
        return solver.backend == "openai_compatible" and (
            solver.engine == "vllm" or (cluster.servers > 0 and cluster.backend == "vllm"))

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> None:
        self.seed()
        if self.updates:
            self.solver.restore(self.paths.checkpoints)
        total = self.cfg.flywheel.rounds * self.interval
        self.after_step()  # a resume first finishes what the last step left undone: its refresh, its round's row
        while self.step < total:
            interrupt.check()  # a stop between stages: everything up to here is committed
            round_ = self.step // self.interval
            if self.step % self.interval == 0 and not self.pool.get_meta(f"flywheel.round.{round_}.done", False):
                self.generation(round_)
                interrupt.check()
            with self.clock("eval"):
                self.evaluate()
            interrupt.check()
            self.train_step(round_)
            self.after_step()
        self.evaluate()
        write_report(self.paths.root, self.pool.envs(), f"aes run {self.paths.root.name}")

    def after_step(self) -> None:
        """What follows a solver step: the refresh every ``trainer.updates_per_refresh`` updates, and the
        round's row after its last step. Each happens once; a resumed run does what a stop or a crash cut."""
        if not self.step:
            return
        if self.cfg.flywheel.refresh and self.updates and self.updates % self.cfg.trainer.updates_per_refresh == 0 \
                and self.pool.get_meta("flywheel.refreshed", -1) != self.updates:
            interrupt.check()
            with self.clock("refresh"):
                self.refresh()
        if self.step % self.interval == 0:
            self.log_round((self.step - 1) // self.interval)

    def seed(self) -> None:
        """The domain's seeds into an empty pool; a seed that cannot be loaded, or more seeds than
        ``flywheel.pool_size``, stop the run with what to fix."""
        if not self.pool.envs():
            from aes.modes import seed_tasks

            seeds = seed_tasks(self.cfg)
            if len(seeds) > self.cfg.flywheel.pool_size:
                raise ConfigError(f"domain.seeds holds {len(seeds)} tasks, more than flywheel.pool_size="
                                  f"{self.cfg.flywheel.pool_size} admitted envs; raise flywheel.pool_size or "
                                  "seed fewer tasks")
        seed_pool(self.stack)

    def _version(self, batch: str) -> None:
        """Record the rollouts from here on as ``batch`` of the current policy."""
        self.rollouts.batch, self.rollouts.policy_version = batch, self.updates

    # -- a generation --------------------------------------------------------------------
    def generation(self, round_: int) -> None:
        """Assignments from the newest rollouts, proposer episodes, admission, calibration;
        then the proposer reflects on its rewards (``harness.reflection``)."""
        log.info("generation %d of %d (policy version %d)", round_ + 1, self.cfg.flywheel.rounds, self.updates)
        self._version(f"u{self.updates:04d}-g{round_}")
        started = f"flywheel.round.{round_}.started"
        if self.pool.get_meta(started) is None:  # the first session of this generation (a resume keeps it)
            self.pool.set_meta(started, {"step": self.step, "entered_pool": self.pool.ever_admitted()})
        waited = self.pool.admit_waiting()  # the room refreshes left: in-band envs that found the pool full first
        if waited:
            log.info("generation %d: %d env(s) that had waited for room entered the pool", round_ + 1, len(waited))
            key = f"flywheel.round.{round_}.entered_after_waiting"
            self.pool.set_meta(key, self.pool.get_meta(key, 0) + len(waited))
        with self.clock("parent_rollouts"):
            assignments = self.assignments(round_)
        if not assignments:
            log.info("generation %d: no proposer episodes: %s", round_ + 1,
                     self.no_episodes or "every assignment had ended before this resume")
        with self.clock("proposer"):  # episodes, with their admission and calibration inside
            if assignments:
                run_episodes(self.stack, assignments, f"generation {round_ + 1}")
        results = round_results(self.pool, round_)  # this session's episodes and those a stop or crash left
        interrupt.check()
        with self.clock("reflection"):
            reflection = self.reflect(round_, results) if self.cfg.harness.reflection else {}
        self.pool.set_meta(f"flywheel.round.{round_}.summary", self.generation_summary(round_, results, reflection))
        self.pool.set_meta(f"flywheel.round.{round_}.done", True)

    def assignments(self, round_: int) -> list[Assignment]:
        """This generation's assignments (the same ones again when a killed generation resumes):
        replacements for the envs the refreshes since the last generation retired, then
        ``assignments_per_round`` on the least-used admitted envs, while the pool has room."""
        saved = self.pool.get_meta(f"flywheel.round.{round_}.assignments")
        self.no_episodes = self.pool.get_meta(f"flywheel.round.{round_}.no_episodes", "")
        if saved is not None:
            closed = {r["assignment_id"] for r in AssignmentLog(self.pool).rows(round_) if r["status"] == "closed"}
            return [Assignment(**a) for a in saved if a["assignment_id"] not in closed]
        fw = self.cfg.flywheel
        retired = self.pool.get_meta("flywheel.replacements", [])
        admitted = len(self.pool.envs("admitted"))
        room = max(fw.pool_size - admitted, 0)
        capacity = math.ceil(room / fw.proposer_samples)  # each episode of an assignment may add an env
        wanted = replacement_assignments(len(retired), fw.replacements_per_retired, fw.proposer_samples)
        n_replace = min(wanted, capacity)
        if n_replace < wanted:
            log.info("generation %d: %d of %d replacement assignment(s) fit in the pool's room (flywheel.pool_size="
                     "%d)", round_ + 1, n_replace, wanted, fw.pool_size)
        n_new = min(fw.assignments_per_round, capacity - n_replace)
        parents = [retired[i % len(retired)] for i in range(n_replace)]  # farthest outside the band first
        picked = assign(self.stack, n_replace + n_new, round_, first=parents)
        self.no_episodes = "" if picked else (
            "flywheel.assignments_per_round is 0 (a static pool)" if fw.assignments_per_round == 0 and not wanted else
            f"the pool was full ({admitted} admitted envs, flywheel.pool_size = {fw.pool_size})" if capacity == 0 else
            "no admitted env to build on")
        self.pool.set_meta(f"flywheel.round.{round_}.no_episodes", self.no_episodes)
        todo = [Assignment(**{**a.to_dict(), "group": f"r{round_}-{i}"})
                for i, a in enumerate(picked) for _ in range(fw.proposer_samples)]
        log_ = AssignmentLog(self.pool)
        for a in todo:
            a.assignment_id = log_.open(a.round, a.parent_env_id, a.to_dict())
        self.pool.set_meta(f"flywheel.round.{round_}.assignments", [a.to_dict() for a in todo])
        self.pool.set_meta(f"flywheel.round.{round_}.replacements", {"retired": len(retired), "opened": n_replace})
        self.pool.set_meta("flywheel.replacements", [])  # every retired env was answered (or the pool is full)
        return todo

    def reflect(self, round_: int, results: list[EpisodeResult]) -> dict:
        """Harness optimization between rounds: the proposer edits its memory, skills and tools."""
        from aes.proposer.reflection import reflect

        return reflect(self.stack, round_, results)

    # -- a solver step -------------------------------------------------------------------
    def train_step(self, round_: int) -> dict | None:
        """One DPPO update on fresh solver groups with reward spread, plus (once, in the update
        right after their generation) the proposer's groups when the policy is shared."""
        self.solver.prepare()  # the trainer loads while the rollouts run
        with self.clock("solver_rollouts"):
            groups, collected = self.solver_groups()
        proposer = self.pending_proposer_groups(round_)
        times = self.pool.get_meta(PROPOSER_GROUP_UPDATES, {})  # updates that trained each group (paper: one)
        row = {"round": round_ + 1, "update": self.updates + 1, "groups_collected": collected,
               "solver/groups": len(groups), "solver/groups_reused": self.reused, "proposer/groups": len(proposer),
               "rollouts/carried": self.carried, "rollouts/tampered": sum(self.rollouts.tampered.values()),
               "proposer/samples_per_group": (statistics.fmean(len(g.episodes) for g in proposer) if proposer else 0),
               "proposer/trained_once": all(times.get(g.key, 0) == 0 for g in proposer) if proposer else None}
        self.step += 1
        stats = None
        if groups or proposer:
            with self.clock("update"):
                stats = train_step(self.solver, groups + proposer, collected, self.metrics, step=self.step, **row)
                self.updates += 1
                self.solver.save(self.paths.checkpoints)
            if proposer:
                self.pool.set_meta(f"flywheel.round.{round_}.proposer_trained", True)
                self.pool.set_meta(PROPOSER_GROUP_UPDATES,
                                   {**times, **{g.key: times.get(g.key, 0) + 1 for g in proposer}})
        else:
            log.warning("no DPPO update at step %d: none of the %d groups drawn had rewards that differ between "
                        "attempts (no reward spread), so there is nothing to learn from this time", self.step, collected)
            self.metrics.log({"event": "no_update", "step": self.step, **row, "update": self.updates}, step=self.step)
        self.pool.set_meta("flywheel.updates", self.updates)
        self.pool.set_meta("flywheel.step", self.step)
        return stats

    def pending_proposer_groups(self, round_: int) -> list:
        """The proposer's groups of this generation, if not trained yet (shared policy only)."""
        fw = self.cfg.flywheel
        if not (fw.shared_policy and fw.train_proposer):
            return []
        if not self.pool.get_meta(f"flywheel.round.{round_}.done", False) \
                or self.pool.get_meta(f"flywheel.round.{round_}.proposer_trained", False):
            return []
        return self.solver.proposer_groups(self.paths.proposer_trajectories, round_)

    def training_envs(self) -> list:
        """Admitted envs in the order to draw them, by the solver's newest rollouts: those where
        its rewards varied first, then those it partly solved, then unseen ones (easiest declared
        difficulty first: a curriculum for a weak solver on a fresh pool), then flat ones."""
        rows = latest_rows(read_index(self.rollouts.index), self.rollouts.solver_name)

        def tier(env) -> tuple[int, int]:
            row = rows.get(env.env_id)
            if row is None or row.get("mean") is None:
                return 2, DIFFICULTY.get(str(env.load().spec.metadata.get("difficulty", "")).lower(), 4)
            if (row.get("std") or 0.0) > 0.0:
                return 0, 0
            return (1, 0) if 0.0 < row["mean"] < 1.0 else (3, 0)

        envs = self.pool.envs("admitted")
        random.Random(self.cfg.seed * 7919 + self.step).shuffle(envs)
        return sorted(envs, key=tier)

    def solver_groups(self) -> tuple[list, int]:
        """Draw envs and roll out ``attempts_per_env`` attempts each until enough groups vary."""
        if self.cfg.flywheel.carry_unfinished:
            return self.carried_groups()
        trainer = self.cfg.trainer
        kept, collected = self.unused_groups()
        reused = {g.meta.get("env_id") for g in kept}
        envs = [e for e in self.training_envs() if e.env_id not in reused]
        runner = self.rollouts.at(f"u{self.updates:04d}-s{self.step:05d}-train", self.updates)
        for draw in range(self.cfg.flywheel.max_group_draws):
            interrupt.check()  # a stop starts no new draw (the attempts a stop cut short leave no group)
            batch = envs[draw * trainer.envs_per_update:(draw + 1) * trainer.envs_per_update]
            if not batch or len(kept) >= trainer.envs_per_update:
                break
            rolled = runner.run([e.load() for e in batch], trainer.attempts_per_env)
            groups = self.solver.groups_of(rolled)
            collected += len(groups)
            kept += [g for g in groups if has_spread(g.rewards)]
        return kept[: trainer.envs_per_update], collected

    def unused_groups(self) -> tuple[list, int]:
        """Groups with reward spread from rollouts the current policy already made and no update
        has used: the generation's parent rollouts and calibration attempts, a refresh's
        recalibration. They are on-policy (same weights, their log-probs recorded), so the
        update takes them instead of rolling those envs out again. Only envs still admitted
        count; evaluation and earlier training batches never do."""
        used = set(self.pool.get_meta("flywheel.used_rollouts", []))
        admitted = {e.env_id: e for e in self.pool.envs("admitted")}
        prefix = f"u{self.updates:04d}-"
        found: dict[str, EnvRollouts] = {}
        keys: dict[str, list[str]] = {}
        for row in read_index(self.rollouts.index):
            batch = row.get("batch", "")
            key = f"{row['env_id']}@{batch}"
            if (row["solver"] != self.rollouts.solver_name or int(row.get("policy_version", 0)) != self.updates
                    or not batch.startswith(prefix) or "-train" in batch or key in used
                    or row["env_id"] not in admitted):
                continue
            keys.setdefault(row["env_id"], []).append(key)
            paths, rewards = row.get("paths") or [], row.get("rewards") or []
            if row.get("errors") or len(paths) != len(rewards):
                continue  # an attempt without a score or a trajectory: not a whole group
            env = found.setdefault(row["env_id"], EnvRollouts(admitted[row["env_id"]].load(), row["env_id"]))
            for path, reward in zip(paths, rewards):
                env.records.append(AttemptRecord(row["env_id"], row["solver"], len(env.records), reward, "ok",
                                                 path=str(self.rollouts.root / path)))
        groups = self.solver.groups_of(found) if found else []
        spread = [g for g in groups if has_spread(g.rewards)]
        kept = spread[: self.cfg.trainer.envs_per_update]
        taken = {g.meta.get("env_id") for g in kept}
        # used, flat or broken: never looked at again (spread groups left over wait for the next update)
        spent = set(keys) - ({g.meta.get("env_id") for g in spread} - taken)
        if spent:
            self.pool.set_meta("flywheel.used_rollouts", sorted(used | {k for e in spent for k in keys[e]}))
        if kept:
            log.info("update %d takes %d group(s) with reward spread from this policy's own rollouts (%s) instead of "
                     "rolling those envs out again", self.updates + 1, len(kept),
                     ", ".join(sorted({k.split("@", 1)[1] for e in taken for k in keys.get(e, [])})))
        self.reused = len(kept)
        return kept, len(groups)

    def carried_groups(self) -> tuple[list, int]:
        """Groups for this update from attempts running in the background: start envs (not already
        in flight) until enough are running, take envs as they complete, and return once
        ``envs_per_update`` groups with spread are ready; what still runs is carried into the next
        update (with the new weights; its earlier tokens keep their log-probs)."""
        trainer = self.cfg.trainer
        target = trainer.envs_per_update
        reused, collected = self.unused_groups()
        kept, self.ready, draws = self.ready + reused, [], 0
        busy = {env_id for batch in self.in_flight for env_id in batch.futures} | {g.meta.get("env_id") for g in reused}
        order = [e for e in self.training_envs() if e.env_id not in busy]
        room = OVERSAMPLE * target  # envs kept in flight: the update starts when the first ones are done
        while len(kept) < target:
            interrupt.check()  # a stop starts no new batch (the attempts a stop cut short leave no group)
            running = sum(len(batch.futures) for batch in self.in_flight)
            if running < room and draws < self.cfg.flywheel.max_group_draws and order:
                start, order = order[:room - running], order[room - running:]
                view = self.rollouts.at(f"u{self.updates:04d}-s{self.step:05d}-train{draws}", self.updates)
                self.in_flight.append(view.submit([e.load() for e in start], trainer.attempts_per_env))
                draws += 1
                continue
            if not running:
                break
            _wait_any(self.in_flight)
            for batch in self.in_flight:
                done = batch.ready()
                if done:
                    groups = self.solver.groups_of(batch.take(done))
                    collected += len(groups)
                    kept += [g for g in groups if has_spread(g.rewards)]
            self.in_flight = [b for b in self.in_flight if b.futures]
        self.ready = kept[target:]
        self.carried = sum(batch.running() for batch in self.in_flight)
        return kept[:target], collected

    # -- evaluation -----------------------------------------------------------------------
    def evaluate(self) -> None:
        """avg@k and pass@k on ``eval.tasks`` at update 0 and every ``eval.every`` updates (once each)."""
        ev = self.cfg.eval
        if not ev.tasks or self.updates % ev.every or self.pool.get_meta("flywheel.evaluated", -1) == self.updates:
            return
        from aes.modes import tasks_under
        from aes.rollout.evaluate import evaluate

        tasks = tasks_under(ev.tasks, "eval.tasks")
        report = evaluate(self.rollouts.at(f"eval-u{self.updates:04d}", self.updates), tasks, ev.attempts,
                          show_progress=False)
        log.info("evaluation at update %d: avg@%d = %.3f, success rate %.3f, pass@%d = %.3f over %d tasks",
                 self.updates, report.k, report.avg_at_k, report.success_rate, report.k, report.pass_at_k,
                 len(report.tasks))
        self.metrics.log({"event": "eval", "update": self.updates, "step": self.step, "eval/tasks": len(report.tasks),
                          f"eval/avg@{report.k}": report.avg_at_k, "eval/success_rate": report.success_rate,
                          f"eval/pass@{report.k}": report.pass_at_k}, step=self.step)
        self.pool.set_meta("flywheel.evaluated", self.updates)

    # -- refresh --------------------------------------------------------------------------
    def refresh(self) -> None:
        """Calibrate the updated solver on the pool again (4 -> 8 attempts, band, spread), retire
        the envs that left the band (keeping ``flywheel.min_pool``) and queue them: the next
        generation opens ``flywheel.replacements_per_retired`` replacement assignments for each,
        built on the retired env from the solver's newest rollouts."""
        self._version(f"u{self.updates:04d}-refresh")
        admitted = self.pool.envs("admitted")
        results = self.parts.calibrator.calibrate([e.load() for e in admitted], diagnose=False)
        outside = [r for r in results if r.decision.verdict != ADMIT]
        cal = self.cfg.calibration
        far = sorted(outside, key=lambda r: -min(abs((r.decision.mean or 0.0) - cal.band_low),
                                                  abs((r.decision.mean or 0.0) - cal.band_high)))
        retire = far[: max(0, len(admitted) - self.cfg.flywheel.min_pool)]
        for result in retire:
            self.pool.set_status(result.env_id, "retired", mean_reward=result.decision.mean,
                                 std_reward=result.decision.std)
        queued = self.pool.get_meta("flywheel.replacements", []) + [r.env_id for r in retire]
        self.pool.set_meta("flywheel.replacements", queued)
        self.pool.set_meta("flywheel.refreshed", self.updates)
        fw = self.cfg.flywheel
        replacements = replacement_assignments(len(retire), fw.replacements_per_retired, fw.proposer_samples)
        log.info("refresh after update %d: %d of %d envs left the band, %d retired, %d replacement assignments "
                 "for the next generation", self.updates, len(outside), len(admitted), len(retire), replacements)
        self.metrics.log({"event": "refresh", "update": self.updates, "step": self.step, "pool": len(admitted),
                          "left_band": len(outside), "retired": len(retire), "replacements": replacements},
                         step=self.step)

    # -- the record -------------------------------------------------------------------------
    def generation_summary(self, round_: int, results: list[EpisodeResult], reflection: dict) -> dict:
        """The generation's part of its round row, over every episode of the generation. Counts of envs,
        each a stage further: ``valid`` (checks 1-4: builds, reference 1, doing nothing < 0.5),
        ``accepted`` (checks 1-6), ``calibrated`` (also in the calibration band), ``entered_pool`` (joined
        the pool; in-band envs that found it full wait, ``waiting_for_room``)."""
        summary = summarize(results)
        versions = [r.assignment.rollout_update for r in results if r.assignment.rollout_update is not None]
        replacements = self.pool.get_meta(f"flywheel.round.{round_}.replacements", {})
        started = self.pool.get_meta(f"flywheel.round.{round_}.started") or {}
        return {
            "generation_step": started.get("step", round_ * self.interval),
            "assignments/rollout_update": min(versions) if versions else None,
            "assignments/policy_version": self.updates,
            "assignments/count": len({r.assignment.group for r in results}),
            "assignments/replacements": replacements.get("opened", 0),
            "assignments/retired_since_last": replacements.get("retired", 0),
            "episodes": summary["episodes"], "valid_env_rate": summary["valid_env_rate"],
            "valid": summary.get("valid", sum(bool(getattr(r, "checks_1_4", False)) for r in results)),
            "accepted": sum(bool(getattr(r, "checks_1_6", False)) for r in results),
            "calibrated": sum(bool(getattr(r, "calibrated", False)) for r in results),
            "entered_pool": self.pool.ever_admitted() - started.get("entered_pool", self.pool.ever_admitted()),
            "entered_pool/after_waiting": self.pool.get_meta(f"flywheel.round.{round_}.entered_after_waiting", 0),
            "waiting_for_room": len(self.pool.envs("calibrated")),
            "proposer/tokens": summary.get("tokens"), "proposer/cost_usd": summary.get("cost_usd"),
            "cost_per_valid_env": summary["cost_per_valid_env"], "tokens_per_valid_env": summary["tokens_per_valid_env"],
            "failures_by_stage": summary["failures_by_stage"], **reflection,
            **({"no_episodes": self.no_episodes or "every assignment of this generation had ended before a resume"}
               if not results else {}),
        }

    def log_round(self, round_: int) -> None:
        """The round's record: its generation, and the solver steps that followed it."""
        if self.pool.get_meta(f"flywheel.round.{round_}.logged", False):
            return
        steps = [r for r in self.metrics.rows() if r.get("event") in ("update", "no_update") and r.get("round") == round_ + 1]
        rewards = [r["solver_reward_mean"] for r in steps if r.get("solver_reward_mean") is not None]
        masked = [r["dppo/masked_fraction"] for r in steps if r.get("dppo/masked_fraction") is not None]
        spent = self.parts.budget.summary()
        self.metrics.log({
            "event": "round", "round": round_ + 1, "step": self.step, "updates": self.updates,
            **self.pool.get_meta(f"flywheel.round.{round_}.summary", {}),
            "pool_size": len(self.pool.envs("admitted")),
            "solver_reward_mean": statistics.fmean(rewards) if rewards else None,
            "dppo/masked_fraction": masked[-1] if masked else None,
            "cost_usd": spent["cost_usd"], "tokens": spent["tokens"], **self.clock.take(),
        }, step=self.step)
        self.pool.set_meta(f"flywheel.round.{round_}.logged", True)
        self.pool.set_meta("flywheel.round", round_ + 1)

    def close(self) -> None:
        self.rollouts.shutdown()
        self.parts.close()


def replacement_assignments(retired: int, per_retired: float, samples: int) -> int:
    """Assignments that ask for ``per_retired`` new envs per retired one: each of its ``samples``
    episodes submits an env, so ``ceil(retired x per_retired / samples)``."""
    return math.ceil(retired * per_retired / max(1, samples) - 1e-9)


def _wait_any(batches: list, timeout: float = 1.0) -> None:
    from concurrent.futures import FIRST_COMPLETED, wait

    pending = [f for batch in batches for fs in batch.futures.values() for f in fs if not f.done()]
    if pending:
        wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
