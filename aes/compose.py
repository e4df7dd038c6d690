"""The composition root: every part of a run is built here, from the config, once.

The entry point (``aes.run`` / ``aes.modes``) calls these builders and hands the parts down;
nothing below builds a part it does not own. The walk of ``cfg`` goes one way::

    models (solver, proposer) -> sandbox (trials) -> rollouts -> pool, admission, calibration
        -> proposer stack (harness per episode, tools) -> trainer (inside the trainable solver)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aes.config import AesConfig, ConfigError
from aes.models import ChatModel, RunBudget, build_model
from aes.paths import RunPaths


def build_trials(cfg: AesConfig):
    """The trial runner of ``sandbox.backend``: Docker (here, or on a Ray cluster with
    ``sandbox.executor=ray``), or the in-process simulation."""
    from aes.interrupt import StopBeforeTrial

    if cfg.sandbox.backend == "simulated":
        from aes.sandbox.simulated import SimulatedTrials

        return StopBeforeTrial(SimulatedTrials(cfg.sandbox, seed=cfg.seed))
    from aes.sandbox.executors import trial_runner

    # sandbox.executor: local, or ray (aes/sandbox/ray_executor.py); no trial starts after Ctrl-C
    return StopBeforeTrial(trial_runner(cfg.sandbox))


def build_rollouts(cfg: AesConfig, paths: RunPaths, solver: ChatModel, trials, judge_model: ChatModel | None = None):
    """The solver's rollout runner; human-in-the-loop tasks run in ``hil.setting`` with its judge
    (``judge_model``: the model behind ``hil.judge=model``, see :func:`build_judge_model`)."""
    from aes.rollout import RolloutRunner

    runner = RolloutRunner(solver, cfg.agent, trials, paths.root, cfg.sandbox.concurrency,
                           infra_limit=cfg.infra_failure_limit)
    from aes.hil.tool import HilRun

    runner.hil = HilRun(cfg.hil.setting, build_judge(cfg, judge_model), cfg.hil.shaped_reward_weight,
                        cfg.hil.max_blockers_per_question)
    return runner


MODEL_JUDGE_BACKENDS = ("anthropic", "openai", "openai_compatible")
"""Proposer backends that judge under ``hil.judge=auto`` (a model behind an API or a server)."""


def judge_kind(cfg: AesConfig, solver: ChatModel | None = None, proposer: ChatModel | None = None) -> str:
    """``hil.judge`` as this run resolves it: ``auto`` is ``model`` when ``hil.judge_model`` is set or
    the proposer is served by an API or a model server and is not the solver (no shared policy), else
    ``keyword``."""
    if cfg.hil.judge != "auto":
        return cfg.hil.judge
    if cfg.hil.judge_model is not None:
        return "model"
    shared = cfg.flywheel.shared_policy or cfg.proposer == cfg.solver or (proposer is not None and proposer is solver)
    return "model" if cfg.proposer.backend in MODEL_JUDGE_BACKENDS and not shared else "keyword"


def build_judge_model(cfg: AesConfig, budget: RunBudget, solver: ChatModel,
                      proposer: ChatModel | None = None) -> tuple[ChatModel | None, bool]:
    """The model behind ``hil.judge=model`` (or ``auto`` resolved to it, :func:`judge_kind`) and
    whether the caller owns it (and must close it): ``hil.judge_model`` when one is chosen, else the
    proposer's model (``proposer``, the live one, when the mode has it). The judge is never silently
    the solver itself: when the proposer's model is the solver's (the same config, or a shared
    policy), ``hil.judge_model`` must name the judge."""
    if judge_kind(cfg, solver, proposer) != "model":
        return None, False
    chosen = cfg.hil.judge_model
    if chosen is None:
        if cfg.proposer == cfg.solver or proposer is solver:
            raise ConfigError(
                "hil.judge=model judges questions with the proposer's model, which in this run is the solver "
                f"itself ({cfg.solver.name}): the solver would grade its own questions. Choose the judge with "
                "proposer@hil.judge_model=NAME (any conf/proposer option, e.g. claude, gpt, local), or set "
                "hil.judge=keyword")
        if proposer is not None:
            return proposer, False
        return build_model(cfg.proposer, budget), True
    if chosen == cfg.solver:
        return solver, False  # chosen by name: the solver's engine, not a second copy of it
    if proposer is not None and proposer is not solver and chosen == cfg.proposer:
        return proposer, False
    return build_model(chosen, budget), True


def build_judge(cfg: AesConfig, model: ChatModel | None):
    """The judge behind ``ask_human``: deterministic, or a model with the domain's judge prompt."""
    from aes.hil.human import KeywordJudge, ModelJudge

    if cfg.hil.judge == "keyword" or (cfg.hil.judge == "auto" and model is None):
        return KeywordJudge()
    import aes.domains

    if model is None:
        raise ConfigError("hil.judge=model needs its model: build it with aes.compose.build_judge_model "
                          "(hil.judge_model, default the proposer's)")
    prompt = Path(aes.domains.__file__).parent / cfg.domain.name / "judge.md"
    return ModelJudge(model, prompt.read_text() if prompt.is_file() else "Decide which blockers a question asks about.")


def build_admission(cfg: AesConfig, trials, rollouts, grader: ChatModel):
    """Checks 1-6 and calibration, owned by the run (never by the proposer)."""
    from aes.admission.decontam import Decontaminator
    from aes.admission.pipeline import AdmissionPipeline
    from aes.admission.review import Reviewer
    from aes.calibration import Calibrator

    validator = make_validator(cfg, trials, generated=True)
    calibrator = Calibrator(cfg.calibration, rollouts)
    pipeline = AdmissionPipeline(
        validator,
        Decontaminator.from_domain(cfg.domain, cfg.admission.ngram),
        Reviewer(grader, cfg.admission, cfg.domain.name) if cfg.admission.review else None,
        calibrator,
    )
    return validator, pipeline, calibrator


def build_proposer_stack(cfg: AesConfig, paths: RunPaths, proposer: ChatModel, rollouts, pool, pipeline, validator):
    from aes.proposer.generate import ProposerStack
    from aes.proposer.tools import ProposerTools

    tools = ProposerTools(validator, rollouts, cfg.harness.solver_probe_attempts, pipeline.decontaminator,
                          pipeline.reviewer)
    return ProposerStack(cfg, paths, pool, proposer, rollouts, pipeline, tools)


def domain_checks(cfg: AesConfig):
    """The domain's own admission checks: ``checks(task_dir, runner, image) -> list[Reason]`` in
    ``aes/domains/<name>/checks.py``, or None when the domain has none."""
    import importlib

    try:
        module = importlib.import_module(f"aes.domains.{cfg.domain.name}.checks")
    except ModuleNotFoundError as exc:
        if exc.name != f"aes.domains.{cfg.domain.name}.checks":
            raise
        return None
    return module.checks


def make_validator(cfg: AesConfig, trials=None, logs_dir=None, generated: bool = False):
    """Admission checks 1-4 as the config says (``admission`` thresholds and time bounds, the domain's reset
    check, do-nothing-earns-zero rule, blocker registry and own checks), on ``trials`` or the configured executor;
    the reference runs' logs (screenshots, ...) kept under ``logs_dir`` when given. ``generated``: the tasks are
    the proposer's (no prebuilt ``docker_image``)."""
    from aes.admission import Validator

    return Validator(cfg.sandbox, trials, nop_max_reward=cfg.admission.nop_max_reward,
                     reset_check=cfg.domain.reset_check, domain_checks=domain_checks(cfg),
                     nop_zero=cfg.domain.nop_zero, logs_dir=logs_dir, blocker_registry=cfg.domain.blocker_registry,
                     admission=cfg.admission, generated=generated)


@dataclass
class FlywheelParts:
    """Everything the flywheel drives, built once."""

    cfg: AesConfig
    paths: RunPaths
    budget: RunBudget
    solver: object
    """The trainable solver (:class:`aes.train.policy.TrainableSolver`)."""
    proposer: ChatModel
    trials: object
    rollouts: object
    pool: object
    calibrator: object
    stack: object
    metrics: object
    judge: ChatModel | None = None
    """The model behind ``hil.judge=model`` when the run built it for that alone (closed with the run)."""

    def close(self) -> None:
        self.metrics.close()
        if self.judge is not None:
            self.judge.close()
        if self.proposer is not self.solver.chat:
            self.proposer.close()
        self.solver.close()


def build_flywheel(cfg: AesConfig, run_dir: Path) -> FlywheelParts:
    """The parts of ``mode=run``; models are health-checked before any container starts."""
    from aes.models import check_models
    from aes.pool import PoolStore
    from aes.report.metrics import MetricsLogger
    from aes.train.backends import build_trainable_solver

    from aes.spend import RecordedBudget

    paths = RunPaths(Path(run_dir))
    budget = RecordedBudget(cfg.budget, paths.spend)  # what earlier sessions of the run spent counts
    solver = build_trainable_solver(cfg, budget, paths)
    # no proposer (a static pool: no assignments, no replacements) needs no proposer model, nor its key or server
    fw = cfg.flywheel
    static = fw.assignments_per_round == 0 and not (fw.refresh and fw.replacements_per_retired > 0)
    proposer = solver.chat if cfg.flywheel.shared_policy or static else build_proposer(cfg, budget, solver.chat)
    judge, owned = None, False
    try:
        # a static pool builds no proposer: its judge is the proposer config's model, built for it
        live = None if static and not cfg.flywheel.shared_policy else proposer
        judge, owned = build_judge_model(cfg, budget, solver.chat, live)
        check_models(solver.chat, proposer, judge)
    except BaseException:
        if owned:
            judge.close()
        if proposer is not solver.chat:
            proposer.close()
        solver.close()
        raise
    trials = build_trials(cfg)
    rollouts = build_rollouts(cfg, paths, solver.chat, trials, judge_model=judge)
    pool = PoolStore(paths.pool)
    validator, pipeline, calibrator = build_admission(cfg, trials, rollouts, proposer)
    stack = build_proposer_stack(cfg, paths, proposer, rollouts, pool, pipeline, validator)
    return FlywheelParts(cfg, paths, budget, solver, proposer, trials, rollouts, pool, calibrator, stack,
                         MetricsLogger(cfg.logger, paths.root), judge if owned else None)


def build_proposer(cfg: AesConfig, budget: RunBudget, solver_chat: ChatModel) -> ChatModel:
    """The proposer's model; the solver's engine when both configs are the same model."""
    if cfg.proposer == cfg.solver:
        return solver_chat
    return build_model(cfg.proposer, budget)
