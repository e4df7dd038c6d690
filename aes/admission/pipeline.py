"""The whole admission pipeline, outside the proposer's reach, then calibration.

Stages in order: static, build, oracle, nop (checks 1-4, :class:`Validator`),
decontam (5), review (6), calibration. The first failing stage stops the pipeline;
its reasons go back to the proposer as feedback. A task is *valid* when it passes
checks 1-6 and *admitted* when calibration also puts it in the band.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from aes.admission.decontam import Decontaminator
from aes.admission.review import Reviewer, ReviewResult
from aes.admission.validate import ValidationReport, Validator, internal_error
from aes.calibration import ADMIT, CalibrationResult, Calibrator
from aes.errors import InfrastructureError
from aes.report.clock import NO_CLOCK
from aes.tasks import Reason, load_task

log = logging.getLogger(__name__)
STAGES = ("static", "build", "oracle", "nop", "hil", "decontam", "review", "calibration")


@dataclass
class AdmissionVerdict:
    """What admission decided about one draft."""

    valid: bool = False
    admitted: bool = False
    failed_stage: str | None = None
    reasons: list[Reason] = field(default_factory=list)
    validation: ValidationReport | None = None
    review: ReviewResult | None = None
    calibration: CalibrationResult | None = None

    @property
    def outcome(self) -> str:
        """broken (fails checks 1-6), valid (not admitted) or admitted."""
        return "admitted" if self.admitted else "valid" if self.valid else "broken"

    def feedback(self, diagnostic_path: str | None = None) -> str:
        """The reasons, for the proposer to act on; ``diagnostic_path``: where the proposer can
        read the diagnostic run's trajectory (its own workspace), if there was one."""
        if self.admitted:
            return "Your task was admitted to the training pool."
        lines = [f"Your task was rejected at the {self.failed_stage} stage:"]
        lines += [f"- {reason}" for reason in self.reasons]
        cal = self.calibration
        if cal is not None and cal.diagnostic is not None:
            lines.append(f"A diagnostic solver run that was shown the reference solution scored "
                         f"{cal.diagnostic.reward}" + (f"; its trajectory: {diagnostic_path}" if diagnostic_path else "."))
        return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _stage(reason: Reason) -> str:
    head = reason.code.split(".", 1)[0]
    return head if head in STAGES else "static"


class AdmissionPipeline:
    def __init__(self, validator: Validator, decontaminator: Decontaminator, reviewer: Reviewer | None,
                 calibrator: Calibrator | None):
        self.validator = validator
        self.decontaminator = decontaminator
        self.reviewer = reviewer
        self.calibrator = calibrator
        self.clock = NO_CLOCK
        """The run's stage clock (``seconds/admission``, ``seconds/calibration`` of a round)."""

    def admit(self, task_dir: Path, env_id: str, parent_dir: Path | None = None,
              calibrate: bool = True) -> AdmissionVerdict:
        """Checks 1-6 on ``task_dir`` (``parent_dir``: the task it was built from, which the review's
        novelty criterion compares against), then calibration unless ``calibrate`` is False (then
        :meth:`calibrate` may follow on the valid verdict).

        Every draft gets a verdict: an error of aes itself while judging it is logged with its
        traceback and rejects the draft (``internal.error``), so one draft never stops a generation;
        only an :class:`~aes.errors.InfrastructureError` is raised."""
        verdict = AdmissionVerdict()
        try:
            with self.clock("admission"):
                verdict = self._checks(task_dir, env_id, parent_dir)
        except InfrastructureError:
            raise
        except Exception as exc:  # noqa: BLE001 - logged with its traceback; the draft gets a verdict
            return self._internal_error(verdict, env_id, exc, None)
        if not calibrate:
            return verdict
        return self.calibrate(verdict, task_dir, env_id)

    def calibrate(self, verdict: AdmissionVerdict, task_dir: Path, env_id: str) -> AdmissionVerdict:
        """Calibration of a task that passed checks 1-6 (a verdict that did not is returned as it is)."""
        if not verdict.valid or self.calibrator is None:
            return verdict
        try:
            with self.clock("calibration"):
                return self._calibrate(verdict, task_dir, env_id)
        except InfrastructureError:
            raise
        except Exception as exc:  # noqa: BLE001 - logged with its traceback; the draft gets a verdict
            return self._internal_error(verdict, env_id, exc, "calibration")

    def _internal_error(self, verdict: AdmissionVerdict, env_id: str, exc: Exception,
                        stage: str | None) -> AdmissionVerdict:
        log.exception("%s: aes failed while judging the draft", env_id)
        verdict.valid = verdict.admitted = False
        self._fail(verdict, [internal_error(exc)])
        verdict.failed_stage = stage or verdict.failed_stage
        return verdict

    def _checks(self, task_dir: Path, env_id: str, parent_dir: Path | None = None) -> AdmissionVerdict:
        """Checks 1-6: ``valid`` when they all pass."""
        verdict = AdmissionVerdict()
        report = self.validator.validate(task_dir)
        verdict.validation = report
        log.info("%s: checks 1-4 %s (oracle %s, do-nothing %s, %.0f s)%s", env_id, "passed" if report.valid else "FAILED",
                 report.oracle_reward, report.nop_reward, report.seconds,
                 f": {report.reasons[0]}" if report.reasons else "")
        if not report.valid:
            return self._fail(verdict, report.reasons)
        task = load_task(task_dir, max_instruction_kb=self.validator.cfg.max_instruction_kb)
        task.env_id = env_id
        overlap = self.decontaminator.check(task.instruction)
        if overlap:
            return self._fail(verdict, [overlap])
        if self.reviewer is not None:
            verdict.review = self.reviewer.review(task_dir, parent_dir)
            log.info("%s: review %s", env_id, "passed" if verdict.review.passed else
                     f"FAILED: {verdict.review.reasons[0] if verdict.review.reasons else ''}")
            if not verdict.review.passed:
                return self._fail(verdict, verdict.review.reasons)
        verdict.valid = True
        return verdict

    def _calibrate(self, verdict: AdmissionVerdict, task_dir: Path, env_id: str) -> AdmissionVerdict:
        task = load_task(task_dir, max_instruction_kb=self.validator.cfg.max_instruction_kb)
        task.env_id = env_id
        log.info("%s: calibrating against the solver", env_id)
        [result] = self.calibrator.calibrate([task], show_progress=False)
        verdict.calibration = result
        log.info("%s: calibration %s: rewards %s (mean %s, std %s)", env_id, result.decision.verdict,
                 result.rewards, _fmt(result.decision.mean), _fmt(result.decision.std))
        if result.decision.verdict != ADMIT:
            return self._fail(verdict, [Reason(f"calibration.{result.decision.verdict}", result.decision.reason)])
        verdict.admitted = True
        return verdict

    @staticmethod
    def _fail(verdict: AdmissionVerdict, reasons: list[Reason]) -> AdmissionVerdict:
        verdict.reasons = list(reasons)
        verdict.failed_stage = _stage(reasons[0]) if reasons else "static"
        return verdict
