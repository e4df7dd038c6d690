"""One proposer episode: assignment -> draft -> admission -> (revisions) -> pool.

Every draft that loads goes into the pool (content-addressed, so a resubmitted draft
is not stored twice) with its verdicts; the episode's outcome — what r_P scores — is the
verdict of the env it finally submitted: admitted, valid (passed checks 1-6, not admitted)
or broken (a last revision that handed nothing in leaves the previous submission standing).

An episode cut short by the infrastructure (its model server went away: an
:class:`~aes.errors.InfrastructureError` out of the harness) has no outcome: it is not the
proposer's failure, so it gets no r_P. Its partial trajectory goes to
``infrastructure_failures/`` (not ``proposer_trajectories/``, where r_P is read from), the
assignment stays open (a rerun of the same run dir redoes it) and the error propagates to
stop the run with what to fix.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from aes.admission.pipeline import AdmissionPipeline, AdmissionVerdict
from aes.agents import write_json_atomic
from aes.errors import InfrastructureError
from aes.paths import INFRASTRUCTURE_FAILURES, PROPOSER_TRAJECTORIES
from aes.pool import AssignmentLog, PoolError, PoolStore
from aes.proposer.assignments import Assignment
from aes.proposer.workspace import Workspace
from aes.tasks import TaskLoadError, load_task

log = logging.getLogger(__name__)


class Harness(Protocol):
    name: str
    tokens: int
    cost_usd: float
    note: str

    def start(self, assignment: Assignment, workspace: Workspace) -> Path | None: ...
    def revise(self, feedback: str) -> Path | None: ...
    def trajectory(self, **extra) -> dict: ...
    def close(self) -> None: ...


@dataclass
class EpisodeResult:
    assignment: Assignment
    outcome: str = "broken"
    """broken, valid or admitted."""
    env_id: str | None = None
    """The pool id of the best draft (the admitted one, if any)."""
    revisions: int = 0
    failed_stages: list[str] = field(default_factory=list)
    """The stage each rejected draft failed at (``no_draft`` when nothing was handed in)."""
    tokens: int = 0
    """Every token the proposer side spent: the harness's model calls and the review's."""
    cost_usd: float = 0.0
    """Every USD the proposer side spent (harness and review)."""
    review_tokens: int = 0
    review_cost_usd: float = 0.0
    checks_1_4: bool = False
    """The finally submitted env built, its reference scored 1 and doing nothing < 0.5 (Table 2's "valid")."""
    checks_1_6: bool = False
    """It also passed decontamination and the review."""
    calibrated: bool = False
    """It also landed in the calibration band (it joined the pool: outcome admitted)."""
    stats: dict = field(default_factory=dict)
    """Fig. 5 statistics of the submitted env: data files, solver turns and success in calibration."""
    reasons: list[str] = field(default_factory=list)
    """The machine-readable reasons of every rejected draft (``oracle.reward_below_one: ...``), in order."""
    feedback: list[str] = field(default_factory=list)
    """What admission told the proposer about each submission, in order (the last one too, though no
    revision followed it); a reflection reads these."""
    trajectory_path: str | None = None


def run_episode(assignment: Assignment, workspace: Workspace, harness: Harness, pipeline: AdmissionPipeline,
                pool: PoolStore, max_revisions: int, out_dir: Path, calibrate_in_episode: bool = True,
                solver_feedback: bool = True) -> EpisodeResult:
    """Drive ``harness`` through at most ``max_revisions`` revisions; record everything.

    ``calibrate_in_episode``: calibration is one of the admission stages a revision answers (the
    flywheel, App. G.4); False (Table 2 and Table 8, §4.1 and App. C): revisions answer checks 1-6
    only and the env finally submitted is calibrated once afterwards, reported beside its validity.
    ``solver_feedback`` False (Table 3's ablation): the proposer is told nothing of the solver's
    results — a calibration verdict reaches it without rewards and without the diagnostic run."""
    result = EpisodeResult(assignment=assignment)
    log_ = AssignmentLog(pool)
    failure: InfrastructureError | None = None
    parent = _parent_dir(pool, assignment.parent_env_id)
    try:
        log.info("%s: episode started (parent %s, %s; harness %s)", assignment.assignment_id, assignment.parent_name,
                 assignment.direction, harness.name)
        draft = harness.start(assignment, workspace)
        verdict, env_id = None, None
        for revision in range(max_revisions + 1):
            log.info("%s: revision %d: %s", assignment.assignment_id, revision,
                     f"draft {draft.name} handed in, admission starts" if draft else f"no draft ({harness.note})")
            result.revisions = revision
            verdict, env_id = _admit(draft, assignment, harness, pipeline, pool, revision, parent,
                                     calibrate_in_episode)
            if verdict is None:
                result.failed_stages.append("no_draft")
                feedback = f"No task was handed in: {harness.note or 'no draft found'}."
            else:
                _judged(result, verdict, env_id, pool)
                if not solver_feedback:
                    feedback = _without_solver(verdict)
                else:
                    feedback = verdict.feedback(None if verdict.admitted else _diagnostic_in(workspace, verdict))
            result.feedback.append(feedback)
            if verdict is not None and (verdict.admitted or (verdict.valid and not calibrate_in_episode)):
                break
            if revision == max_revisions:
                break
            draft = harness.revise(feedback)
        if not calibrate_in_episode and verdict is not None and verdict.valid and env_id is not None:
            verdict = pipeline.calibrate(verdict, pool.get(env_id).path, env_id)
            _record_calibration(pool, env_id, verdict)
            _table2(result, verdict, pool.get(env_id).path)
            result.outcome = verdict.outcome
            if not verdict.admitted:
                result.failed_stages.append("calibration")
                result.reasons += [_solver_free(r) if not solver_feedback else str(r) for r in verdict.reasons]
    except InfrastructureError as exc:
        failure = exc
        raise
    finally:
        result.tokens = harness.tokens + result.review_tokens
        result.cost_usd = harness.cost_usd + result.review_cost_usd
        if failure is not None:
            _set_aside(assignment, harness, result, out_dir, failure)
        else:
            trajectory = harness.trajectory(assignment=assignment.to_dict(solver_feedback), outcome=result.outcome,
                                            env_id=result.env_id, revisions=result.revisions,
                                            failed_stages=result.failed_stages, feedback=result.feedback)
            path = out_dir / PROPOSER_TRAJECTORIES / f"{assignment.assignment_id}.json"
            write_json_atomic(path, trajectory)
            result.trajectory_path = str(path)
        harness.close()
        if failure is None:
            log_.close(assignment.assignment_id, result.outcome, result.env_id, result.cost_usd, result.tokens)
            log.info("%s: episode ended %s after %d revision(s) (failed stages: %s; %d tokens, $%.4f)",
                     assignment.assignment_id, result.outcome, result.revisions,
                     ", ".join(result.failed_stages) or "none", result.tokens, result.cost_usd)
    if not solver_feedback:
        result.reasons = [_solver_free(r) if r.startswith("calibration") else r for r in result.reasons]
    return result


def _parent_dir(pool: PoolStore, env_id: str) -> Path | None:
    try:
        return pool.get(env_id).path
    except PoolError:  # a parent that is not in this pool (an assignment of another run): no novelty context
        return None


def _judged(result: EpisodeResult, verdict: AdmissionVerdict, env_id: str, pool: PoolStore) -> None:
    """What the episode keeps of the verdict on one submission (the last one stands)."""
    if not verdict.admitted and (verdict.failed_stage or not verdict.valid):  # valid, not yet calibrated: no failure
        result.failed_stages.append(verdict.failed_stage or "static")
        result.reasons += [str(reason) for reason in verdict.reasons]
    result.outcome, result.env_id = verdict.outcome, env_id
    _table2(result, verdict, pool.get(env_id).path)


WITHHELD = ("in this run the solver's results are not shown to you (no rewards, no failures, no "
            "diagnostic run)")


def _solver_free(reason) -> str:
    """A calibration reason without the solver's results — not even whether it found the task too hard
    or too easy (Table 3's no-feedback arm)."""
    text = str(reason)
    return f"calibration.not_admitted: {WITHHELD}" if text.startswith("calibration") else text


def _without_solver(verdict: AdmissionVerdict) -> str:
    """Admission's feedback with nothing of the solver in it."""
    if verdict.failed_stage != "calibration":
        return verdict.feedback(None)
    return ("Your task passed the admission checks, but calibration against the solver did not admit it; "
            f"{WITHHELD}.")


def _table2(result: EpisodeResult, verdict: AdmissionVerdict, env_path: Path) -> None:
    """What Table 2 and Fig. 5 count of the submission just judged (the last one stands)."""
    if verdict.review is not None:
        result.review_tokens += verdict.review.tokens
        result.review_cost_usd += verdict.review.cost_usd
    result.checks_1_4 = verdict.validation is not None and verdict.validation.valid
    result.checks_1_6, result.calibrated = verdict.valid, verdict.admitted
    result.stats = {"data_files": _data_files(env_path)} if result.checks_1_4 else {}
    cal = verdict.calibration
    if cal is not None and result.checks_1_4:
        result.stats.update(solver_success=cal.decision.mean, solver_turns=_mean_turns(cal))


def _data_files(env_path: Path) -> int:
    """Files the environment ships besides its Dockerfile (Fig. 5: data files per env)."""
    root = env_path / "environment"
    return sum(1 for p in root.rglob("*") if p.is_file() and p.name != "Dockerfile") if root.is_dir() else 0


def _mean_turns(cal) -> float | None:
    import json
    import statistics

    turns = []
    for path in getattr(cal, "paths", []) or []:
        try:
            steps = json.loads(Path(path).read_text()).get("steps", [])
        except (OSError, ValueError):
            continue
        turns.append(sum(s.get("source") == "agent" for s in steps))
    return statistics.fmean(turns) if turns else None


def _diagnostic_in(workspace: Workspace, verdict: AdmissionVerdict) -> str | None:
    """Copy the diagnostic (hinted) solver run into the workspace; its path as the proposer sees it."""
    cal = verdict.calibration
    if cal is None or cal.diagnostic is None or not cal.diagnostic.path or not Path(cal.diagnostic.path).is_file():
        return None
    target = workspace.root / "past_trajectories" / "diagnostics" / f"{cal.env_id}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(cal.diagnostic.path, target)
    return f"/workspace/past_trajectories/diagnostics/{target.name}"


def _set_aside(assignment: Assignment, harness: Harness, result: EpisodeResult, out_dir: Path,
               failure: InfrastructureError) -> None:
    """Keep the partial trajectory of an episode the infrastructure cut short where no r_P is read
    from; the assignment is left open."""
    path = out_dir / INFRASTRUCTURE_FAILURES / f"{assignment.assignment_id}.json"
    extra = {"assignment": assignment.to_dict(), "outcome": None, "env_id": result.env_id,
             "revisions": result.revisions, "failed_stages": result.failed_stages,
             "infrastructure_error": str(failure)}
    try:
        trajectory = harness.trajectory(**extra)
    except AssertionError:  # the harness had not started its episode: nothing was recorded yet
        trajectory = {"extra": extra}
    write_json_atomic(path, trajectory)
    result.trajectory_path = str(path)
    log.warning("%s: proposer episode stopped by the infrastructure, not scored (the assignment stays open; "
                "partial trajectory in %s): %s", assignment.assignment_id, path, failure)


def _admit(draft: Path | None, assignment: Assignment, harness: Harness, pipeline: AdmissionPipeline,
           pool: PoolStore, revision: int, parent: Path | None = None,
           calibrate: bool = True) -> tuple[AdmissionVerdict | None, str | None]:
    if draft is None:
        return None, None
    try:
        name = load_task(draft).name
    except TaskLoadError:
        name = f"{assignment.assignment_id}-r{revision}"
    env, created = pool.add(draft, name=name, parent_id=assignment.parent_env_id,
                            assignment_id=assignment.assignment_id, round=assignment.round,
                            revisions=revision, cost_usd=harness.cost_usd, tokens=harness.tokens)
    if not created:
        log.info("%s: draft %s has the content of pool env %s (%s)", assignment.assignment_id, draft.name,
                 env.env_id, env.status)
    verdict = pipeline.admit(env.path, env.env_id, parent, calibrate=calibrate)
    _record(pool, env.env_id, verdict)
    return verdict, env.env_id


def _record(pool: PoolStore, env_id: str, verdict: AdmissionVerdict) -> None:
    """Store every stage's verdict and move the env through its statuses."""
    report = verdict.validation
    checks_passed = report is not None and report.valid
    pool.add_verdict(env_id, "checks_1_4", checks_passed, [str(r) for r in (report.reasons if report else [])],
                     {"oracle_reward": report.oracle_reward, "nop_reward": report.nop_reward} if report else {})
    status = pool.get(env_id).status
    if status in ("admitted", "retired", "invalid"):
        return
    if not verdict.valid:
        if verdict.failed_stage in ("decontam", "review"):
            pool.add_verdict(env_id, verdict.failed_stage, False, [str(r) for r in verdict.reasons])
        pool.set_status(env_id, "invalid")
        return
    pool.add_verdict(env_id, "decontam_review", True, [])
    if status == "proposed":
        pool.set_status(env_id, "valid")
    _record_calibration(pool, env_id, verdict)


def _record_calibration(pool: PoolStore, env_id: str, verdict: AdmissionVerdict) -> None:
    """Store the calibration verdict (if calibration ran) and admit the env when it is in the band."""
    cal = verdict.calibration
    if cal is None or pool.get(env_id).status in ("admitted", "retired", "invalid"):
        return
    pool.add_verdict(env_id, "calibration", verdict.admitted, [str(r) for r in verdict.reasons],
                     {"rewards": cal.rewards, "mean": cal.decision.mean, "std": cal.decision.std,
                      "verdict": cal.decision.verdict})
    if verdict.admitted:
        pool.set_status(env_id, "calibrated", mean_reward=cal.decision.mean, std_reward=cal.decision.std)
        pool.set_status(env_id, "admitted")
