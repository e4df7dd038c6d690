"""Calibrate candidate envs against the current solver (DESIGN.md §Calibration)."""

from __future__ import annotations

from dataclasses import dataclass, field

from aes.calibration.band import TOO_HARD, BandDecision, decide, needs_expansion
from aes.config import CalibrationConfig
from aes.rollout import AttemptRecord, RolloutRunner
from aes.tasks import Task

HINT_CHARS = 6000


@dataclass
class CalibrationResult:
    """The band verdict on one env, with the diagnostic rollout when it was too hard."""

    env_id: str
    task: str
    decision: BandDecision
    rewards: list[float]
    expanded: bool
    build_error: str | None = None
    diagnostic: AttemptRecord | None = None
    """The rollout with reference-solution hints, run when the env is below the band."""
    paths: list[str] = field(default_factory=list)
    """Trajectory files of the calibration attempts."""


def solution_hints(task: Task) -> str:
    script = (task.solution_dir / "solve.sh").read_text(encoding="utf-8", errors="replace")
    if len(script) > HINT_CHARS:
        script = script[:HINT_CHARS] + "\n# [... truncated ...]\n"
    return f"```bash\n{script}```\n"


class Calibrator:
    """Runs the band protocol: initial attempts, expansion near an edge, verdict, diagnostics."""

    def __init__(self, cfg: CalibrationConfig, rollouts: RolloutRunner):
        self.cfg = cfg
        self.rollouts = rollouts

    def calibrate(self, tasks: list[Task], show_progress: bool = True, diagnose: bool = True) -> list[CalibrationResult]:
        """The band verdict on each task (``diagnose``: a hinted rollout for those below the band)."""
        envs = self.rollouts.run(tasks, self.cfg.initial_attempts, show_progress=show_progress, label="calibration")
        near_edge = [env.task for env in envs.values() if needs_expansion(env.rewards, self.cfg)]
        if near_edge:
            envs.update(self.rollouts.run(near_edge, self.cfg.expanded_attempts, show_progress=show_progress,
                                          label="calibration (near a band edge: expanded)"))
        results = [
            CalibrationResult(env_id=env.env_id, task=env.task.name, decision=decide(env.rewards, self.cfg),
                              rewards=env.rewards, expanded=len(env.records) > self.cfg.initial_attempts,
                              build_error=env.build_error, paths=[r.path for r in env.records if r.path])
            for env in envs.values()
        ]
        if diagnose:
            self._diagnose([r for r in results if r.decision.verdict == TOO_HARD], envs)
        return results

    def _diagnose(self, too_hard: list[CalibrationResult], envs) -> None:
        if not too_hard or self.cfg.diagnostic_rollouts < 1:
            return
        tasks = [envs[r.env_id].task for r in too_hard]
        runner = self.rollouts.variant(f"{self.rollouts.solver_name}-diagnostic")
        diag = runner.run(tasks, self.cfg.diagnostic_rollouts,
                          hints={envs[r.env_id].env_id: solution_hints(envs[r.env_id].task) for r in too_hard},
                          show_progress=False, label="diagnostic rollout (reference hints)")
        for result in too_hard:
            records = sorted(diag[result.env_id].records, key=lambda r: r.attempt)
            result.diagnostic = records[0] if records else None
