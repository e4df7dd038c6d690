"""The modes of ``python -m aes.run`` that drive the solver: rollout, calibrate, eval."""

from __future__ import annotations

import json
import logging
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from aes.config import AesConfig, ConfigError
from aes.report.tables import print_table

if TYPE_CHECKING:
    from aes.models import ChatModel, RunBudget

log = logging.getLogger("aes")


MODE_KEYS = {"validate": ("tasks",), "rollout": ("tasks", "attempts"), "calibrate": ("tasks",),
             "eval": ("tasks", "k"), "generate": ("assignments",), "train": ("trajectories",),
             "sft": ("trajectories",)}
"""The root keys each mode reads; given to another mode on the command line, they are refused."""
ARGUMENTS = ("tasks", "attempts", "k", "assignments", "trajectories")
READ_BY = {"tasks": "validate, rollout, calibrate and eval (mode=run seeds its pool from domain.seeds; "
                    "eval.tasks evaluates during a run)",
           "attempts": "rollout (mode=eval: k=, calibration: calibration.initial_attempts=)",
           "k": "eval (during a run: eval.attempts=)", "assignments": "generate (mode=run: "
           "flywheel.assignments_per_round=)", "trajectories": "train and sft"}


def check_arguments(cfg: AesConfig, given: list[str]) -> None:
    """No silently ignored argument: a mode's input (``tasks=``, ``attempts=``, ``k=``,
    ``assignments=``, ``trajectories=``) given on the command line of a mode that does not read
    it is a usage error."""
    keys = {o.partition("=")[0].lstrip("+~") for o in given}
    for key in ARGUMENTS:
        if key in keys and key not in MODE_KEYS.get(cfg.mode, ()):
            raise ConfigError(f"{key}= is not read by mode={cfg.mode}, only by mode={READ_BY[key]}; drop it "
                              "or choose the mode that reads it")


def load_tasks(cfg: AesConfig) -> list:
    """The tasks under ``tasks=DIR``; ones that cannot be loaded are reported and skipped."""
    if not cfg.tasks:
        raise ConfigError(f"mode={cfg.mode} needs tasks=DIR (a task dir or a dir of task dirs)")
    return tasks_under(cfg.tasks)


def task_paths(directory: str | Path, key: str = "tasks") -> list[Path]:
    """The task dirs at ``directory`` (itself, or the task dirs one level down); a path that does not
    exist, is not a dir or holds no task is a usage error naming ``key``, the config key it came from."""
    from aes.tasks import find_tasks

    path = Path(directory)
    what = "set it to a task dir (holding task.toml) or a dir of task dirs"
    if not path.exists():
        raise ConfigError(f"{key}={directory}: no such file or directory; {what}")
    if not path.is_dir():
        raise ConfigError(f"{key}={directory} is a file, not a dir; {what}")
    found = find_tasks([path])
    if found == [path] and not (path / "task.toml").is_file():
        raise ConfigError(f"{key}={directory}: no task there (no task.toml in it or in any dir directly below "
                          f"it); {what}")
    return found


def tasks_under(directory: str, key: str = "tasks") -> list:
    """The loadable tasks under ``directory`` (the value of the config key ``key``); the others are
    reported and skipped. A path that does not exist or holds no task is a usage error."""
    from aes.tasks import TaskLoadError, load_task

    tasks = []
    for path in task_paths(directory, key):
        try:
            tasks.append(load_task(path))
        except TaskLoadError as exc:
            log.error("skipping %s: %s: %s", path, exc.code, exc)
    if not tasks:
        raise ConfigError(f"{key}={directory}: no loadable task there (each one's error is above)")
    return tasks


def seed_tasks(cfg: AesConfig) -> list[Path]:
    """The domain's seed task dirs, each loaded once to check it: a seed that cannot be loaded is a
    usage error naming it (the pool would be seeded without it)."""
    from aes.domains import seeds_dir
    from aes.tasks import TaskLoadError, load_task

    key = "domain.seeds"
    paths = task_paths(seeds_dir(cfg.domain), key)
    for path in paths:
        try:
            load_task(path)
        except TaskLoadError as exc:
            raise ConfigError(f"seed task {path} cannot be loaded ({exc.code}): {exc}; fix it, or set "
                              f"{key}=DIR to other seeds") from None
    return paths


@contextmanager
def solver_session(cfg: AesConfig, run_dir: Path, budget: RunBudget | None = None, proposer: ChatModel | None = None):
    """A rollout runner for the configured solver and sandbox; closes the models and reports spend.

    The solver, ``proposer`` (when the mode also uses one, sharing ``budget``) and the judge of
    ``hil.judge=model`` (``hil.judge_model``, else the proposer's) are health-checked before the
    sandbox is touched: a model server that is down stops the mode with its address.
    """
    from aes.compose import build_judge_model, build_rollouts, build_trials
    from aes.models import build_model, check_models
    from aes.paths import RunPaths
    from aes.spend import RecordedBudget

    budget = RecordedBudget(cfg.budget, RunPaths(run_dir).spend) if budget is None else budget
    solver = build_model(cfg.solver, budget)
    judge, owned = None, False
    try:
        judge, owned = build_judge_model(cfg, budget, solver, proposer)
        check_models(solver, proposer, judge)
        yield build_rollouts(cfg, RunPaths(run_dir), solver, build_trials(cfg), judge_model=judge)
    finally:
        if owned:
            judge.close()
        solver.close()
        s = budget.summary()
        log.info("model calls of this run (every session): %d, tokens: %d, cost: $%.4f", s["model_calls"], s["tokens"],
                 s["cost_usd"])


def rollout(cfg: AesConfig, run_dir: Path) -> bool:
    """``mode=rollout``: ``attempts`` solver attempts on each task; trajectories + index."""
    tasks = load_tasks(cfg)
    with solver_session(cfg, run_dir) as runner:
        envs = runner.run(tasks, cfg.attempts)
    rows = [env.row(runner.solver_name) for env in envs.values()]
    print_table(f"rollouts of {runner.solver_name}", ["env", "attempts", "mean", "std", "most common failure"],
                [[r.env_id, r.attempts, r.mean, r.std, r.most_common_failure or ""] for r in rows])
    log.info("trajectories in %s", runner.root)
    return True


def calibrate(cfg: AesConfig, run_dir: Path) -> bool:
    """``mode=calibrate``: the calibration band verdict on each task."""
    from aes.calibration import Calibrator

    tasks = load_tasks(cfg)
    with solver_session(cfg, run_dir) as runner:
        results = Calibrator(cfg.calibration, runner).calibrate(tasks)
    print_table("calibration", ["env", "attempts", "mean", "std", "verdict", "why"],
                [[r.env_id, r.decision.attempts, r.decision.mean, r.decision.std, r.decision.verdict,
                  r.build_error or r.decision.reason] for r in results])
    records = [{"env_id": r.env_id, "task": r.task, "rewards": r.rewards, "expanded": r.expanded,
                "verdict": r.decision.verdict, "mean": r.decision.mean, "std": r.decision.std,
                "reason": r.decision.reason, "build_error": r.build_error,
                "diagnostic": r.diagnostic.__dict__ if r.diagnostic else None} for r in results]
    (run_dir / "calibration.json").write_text(json.dumps(records, indent=2) + "\n")
    return True


def evaluate(cfg: AesConfig, run_dir: Path) -> bool:
    """``mode=eval``: avg@k and pass@k over a directory of tasks, per-task results saved (eval.json),
    the scores a metrics row (metrics.jsonl, wandb)."""
    from aes.rollout.evaluate import evaluate as run_eval

    tasks = load_tasks(cfg)
    with solver_session(cfg, run_dir) as runner:
        report = run_eval(runner, tasks, cfg.k)
    print_table(f"evaluation of {runner.solver_name} (k={report.k})",
                ["env", "rewards", "mean reward", "success rate", "pass"],
                [[s.env_id, " ".join(_fmt(r) for r in s.rewards) or s.error, s.mean, s.success_rate,
                  "yes" if s.passed else "no"] for s in report.tasks])
    log.info("avg@%d = %.3f (mean reward)   success rate %.3f (attempts at 1.0)   pass@%d = %.3f   over %d tasks",
             report.k, report.avg_at_k, report.success_rate, report.k, report.pass_at_k, len(report.tasks))
    if report.hil:
        h = report.hil
        log.info("human-in-the-loop (%s): mean reward %.3f   success rate %.3f   Ask-F1 %.3f   ask rate %.3f   "
                 "(precision %.3f, recall %.3f, %d attempts)", h["setting"], h["mean_reward"], h["success_rate"],
                 h["ask_f1"], h["ask_rate"], h["precision"], h["recall"], h["attempts"])
    (run_dir / "eval.json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    record(cfg, run_dir, {"event": "eval", "update": 0, "solver": runner.solver_name, "eval/tasks": len(report.tasks),
                          f"eval/avg@{report.k}": report.avg_at_k, f"eval/pass@{report.k}": report.pass_at_k,
                          **({f"hil/{k}": v for k, v in report.hil.items()} if report.hil else {})})
    return True


def record(cfg: AesConfig, run_dir: Path, row: dict) -> None:
    """One metrics row of a mode that is not the loop (generate's Table 2 summary, eval's scores):
    metrics.jsonl of the run dir and, with ``logger=wandb``, the wandb run (config, name, tags)."""
    from aes.report.metrics import MetricsLogger

    metrics = MetricsLogger(cfg.logger, run_dir)
    try:
        metrics.log(row)
    finally:
        metrics.close()


def _fmt(reward: float | None) -> str:
    return "err" if reward is None else f"{reward:.2f}"


def generate(cfg: AesConfig, run_dir: Path) -> bool:
    """``mode=generate``: ``assignments`` proposer episodes against the run's pool (Table 2 columns in
    generate.json, the summary a metrics row: metrics.jsonl, wandb)."""
    from aes.compose import build_admission, build_proposer_stack
    from aes.models import build_model
    from aes.paths import RunPaths
    from aes.pool import PoolStore
    from aes.proposer import generate as run_generate
    from aes.spend import RecordedBudget

    paths = RunPaths(run_dir)
    seed_tasks(cfg)
    budget = RecordedBudget(cfg.budget, paths.spend)
    proposer = build_model(cfg.proposer, budget)
    try:
        with solver_session(cfg, run_dir, budget, proposer) as runner:
            validator, pipeline, _ = build_admission(cfg, runner.trials, runner, proposer)
            stack = build_proposer_stack(cfg, paths, proposer, runner, PoolStore(paths.pool), pipeline, validator)
            results, summary = run_generate(cfg, stack)
    finally:
        proposer.close()
    print_table(f"proposer episodes ({cfg.proposer.name}, harness={cfg.harness.name})",
                ["assignment", "parent", "direction", "outcome", "revisions", "failed stages", "tokens", "cost $"],
                [[r.assignment.assignment_id, r.assignment.parent_env_id, r.assignment.direction, r.outcome,
                  r.revisions, ", ".join(r.failed_stages), r.tokens, f"{r.cost_usd:.4f}"] for r in results])
    from aes.report.table2 import ci_text

    print_table("Table 2 columns (each episode judged on the env it finally submitted)",
                ["valid (checks 1-4)", "accepted (checks 1-6)", "calibrated (in the band)", "failures by stage",
                 "mean revisions", "tokens / valid env", "cost / valid env"],
                [[ci_text(summary["valid_ci"]), ci_text(summary["accepted_ci"]), ci_text(summary["calibrated_ci"]),
                  ", ".join(f"{k}: {v}" for k, v in sorted(summary["failures_by_stage"].items())) or "-",
                  "n/a (no episodes)" if summary["mean_revisions"] is None else f"{summary['mean_revisions']:.2f}",
                  summary["tokens_per_valid_env"] or "n/a (no valid env)",
                  summary["cost_per_valid_env"] or "n/a (no valid env)"]])
    rounds = summary["domain_accepted_rounds"]
    print_table(f"Table 8 columns (domain={cfg.domain.name}, proposer={cfg.proposer.name})",
                ["episodes", "accepted (checks 1-4 as the domain runs them)", "mean rounds of accepted (first draft = 1)"],
                [[summary["episodes"], ci_text(summary["domain_accepted_ci"]),
                  "n/a (none accepted)" if rounds is None else f"{rounds:.2f}"]])
    if not summary["valid"]:
        log.info("no valid env: %s", _why_none(results))
    record(cfg, run_dir, {"event": "generate", "proposer": cfg.proposer.name, "harness": cfg.harness.name,
                          "domain": cfg.domain.name, "solver": cfg.solver.name, **summary})
    return True


def _why_none(results: list) -> str:
    """A sentence on why a generation produced no valid env."""
    stages = Counter(s for r in results for s in r.failed_stages)
    if not results:
        return "no episode ran (no assignment: the pool is empty or full)"
    if stages.get("no_draft", 0) == sum(stages.values()):
        return "the proposer wrote no task files in any episode (its replies held no draft)"
    return "drafts failed at " + ", ".join(f"{stage} ({n})" for stage, n in stages.most_common())


def train(cfg: AesConfig, run_dir: Path) -> bool:
    """``mode=train``: DPPO updates of the solver on stored trajectories (``trajectories=DIR``).

    The groups are the (env, solver) directories of the rollouts; flat groups are dropped and
    batches of ``trainer.envs_per_update`` groups are trained in turn. The rollouts' own
    log-probs are the behaviour policy, so the trust region applies as in the flywheel.
    """
    from aes.models import check_models
    from aes.paths import RunPaths
    from aes.report.metrics import MetricsLogger
    from aes.spend import RecordedBudget
    from aes.train.advantages import GroupBatcher
    from aes.train.backends import build_trainable_solver
    from aes.train.step import train_step

    if not cfg.trajectories:
        raise ConfigError("mode=train needs trajectories=DIR: a trajectories/ dir written by mode=rollout")
    solver = build_trainable_solver(cfg, RecordedBudget(cfg.budget, RunPaths(run_dir).spend), RunPaths(run_dir))
    try:
        check_models(solver.chat)  # the engine that takes the new weights (a vLLM server for solver=qwen)
    except BaseException:
        solver.close()
        raise
    metrics = MetricsLogger(cfg.logger, run_dir)
    try:
        groups = iter(solver.groups_from(Path(cfg.trajectories)))
        batcher, updates = GroupBatcher(cfg.trainer.envs_per_update), 0
        while True:
            batch = batcher.fill(groups)
            if not batch.groups:
                break
            updates += 1
            stats = train_step(solver, batch.groups, batch.collected, metrics, step=updates, update=updates)
            log.info("update %d: %d groups, reward mean %.3f, masked fraction %.4f", updates, batch.kept,
                     stats.get("reward_mean", float("nan")), stats.get("masked_fraction", float("nan")))
            if not batch.full:
                break
        if updates == 0:
            log.error("nothing to train on: none of the %d groups in %s has rewards that differ between "
                      "attempts", batcher.collected_total, cfg.trajectories)
            return False
        solver.save(RunPaths(run_dir).checkpoints)
        log.info("%d update(s); checkpoint in %s", updates, RunPaths(run_dir).checkpoints)
        return True
    finally:
        metrics.close()
        solver.close()


def sft(cfg: AesConfig, run_dir: Path) -> bool:
    """``mode=sft``: the cold start (paper App. H): supervised fine-tuning of the solver's policy on
    stored trajectories (``trajectories=DIR``), filtered and trained as :mod:`aes.train.sft` says.
    Writes a DeepSpeed checkpoint in the DPPO trainer's format and, by default, the weights as a
    model that ``solver.model`` / ``proposer.model`` can name (``RUN_DIR/sft_model``)."""
    from aes.report.metrics import MetricsLogger
    from aes.train.sft import cold_start

    if not cfg.trajectories:
        raise ConfigError("mode=sft needs trajectories=DIR: a dir of ATIF trajectories (a run dir, its "
                          "trajectories/ or proposer/proposer_trajectories/)")
    metrics = MetricsLogger(cfg.logger, run_dir)
    try:
        result = cold_start(cfg, run_dir, metrics)
    finally:
        metrics.close()
    examples, history = result.examples, result.history
    print_table("cold start (mode=sft)", ["trajectories", "proposer", "solver", "rendered", "steps",
                                          "first loss", "last loss"],
                [[len(examples), sum(e.role == "proposer" for e in examples), sum(e.role == "solver" for e in examples),
                  sum(e.tokens_from == "rendered" for e in examples), result.steps,
                  history[0]["loss"] if history else None, history[-1]["loss"] if history else None]])
    log.info("checkpoint: %s (DPPO resumes from it)", result.checkpoint)
    for path in result.exported:
        log.info("weights exported to %s", path)
    return True
