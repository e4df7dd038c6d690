"""Host-side tools of the proposer: ``validate`` and ``solver_model``.

``validate`` runs on a draft what admission runs before calibration: checks 1-4 (static, build,
reference, do nothing, and the domain's reset and own checks), then decontamination and, where a
grader is configured, the review — with the logs and every verdict. The review's tokens are the
proposer's (the harness adds them to its own). ``solver_model`` is not offered where the proposer
may not see the solver's results (``harness.solver_feedback`` off: Table 3's ablation).

A ``solver_model`` probe is a batch of the run's solver rollouts like any other: its attempts
land in the one trajectory index (``trajectories/index.jsonl``) under the env id
``probe-<content hash of the draft>`` and the batch ``<current batch>-probe``, with the policy
version of the solver that ran them. A draft probed again under the same policy reuses those
attempts; under a newer policy it is attempted afresh (another batch), never answered with an
older policy's rewards. Probe envs are not in the pool, so they never train the solver."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path

from aes.admission import Validator
from aes.admission.decontam import Decontaminator
from aes.admission.review import Reviewer
from aes.agents import HostTool
from aes.models import ToolSpec
from aes.paths import PROBE
from aes.pool import content_hash
from aes.proposer.workspace import Workspace
from aes.rollout import RolloutRunner
from aes.tasks import TaskLoadError, load_task

_TAIL = 1500

VALIDATE_SPEC = ToolSpec(
    name="validate",
    description="Build your draft task and run what admission runs before calibration: its reference solution "
                "(must score 1.0), a do-nothing run, the domain's checks, decontamination and the review. "
                "Returns every verdict and the logs.",
    parameters={"type": "object", "properties": {"path": {"type": "string", "description":
                "Draft directory, e.g. env_001 (default: the latest)."}}},
)
SOLVER_SPEC = ToolSpec(
    name="solver_model",
    description="Let the current solver attempt your draft a few times; returns its rewards and failures.",
    parameters={"type": "object", "properties": {
        "path": {"type": "string", "description": "Draft directory (default: the latest)."},
        "attempts": {"type": "integer", "description": "Number of attempts (default from config)."}}},
)


def _tail(text: str) -> str:
    text = (text or "").strip()
    return text if len(text) <= _TAIL else "..." + text[-_TAIL:]


def probe_batch(rollouts: RolloutRunner) -> str:
    """The index batch of probes run now: the rollouts' current batch (which names the policy
    version in the flywheel, ``u0012-g3``) or the policy version itself."""
    return f"{rollouts.batch or f'u{rollouts.policy_version:04d}'}-{PROBE}"


Spend = Callable[[int, float], None]
"""Where a tool's model use is counted: ``spend(tokens, usd)``."""


class ProposerTools:
    def __init__(self, validator: Validator, rollouts: RolloutRunner | None, probe_attempts: int,
                 decontaminator: Decontaminator | None = None, reviewer: Reviewer | None = None):
        self.validator = validator
        self.rollouts = rollouts
        self.probe_attempts = probe_attempts
        self.decontaminator = decontaminator
        self.reviewer = reviewer

    def validate(self, draft: Path, full: bool = True, spend: Spend | None = None,
                 parent: Path | None = None) -> tuple[str, bool]:
        """A readable verdict on ``draft`` and whether it passed: checks 1-4, then (``full``)
        decontamination and the review (its tokens go to ``spend``; ``parent``: the task it was built
        from, for the novelty criterion)."""
        report = self.validator.validate(draft)
        lines = [f"checks 1-4: {'passed' if report.valid else 'FAILED'}; oracle reward {report.oracle_reward}; "
                 f"do-nothing reward {report.nop_reward}"]
        lines += [f"- {reason}" for reason in report.reasons]
        lines += [f"- note: {note}" for note in report.notes]
        if report.oracle is not None:
            lines.append(f"solve.sh output:\n{_tail(report.oracle.agent_output)}")
            lines.append(f"verifier output after the oracle:\n{_tail(report.oracle.verifier_output)}")
        if report.nop is not None and report.nop.verifier_output:
            lines.append(f"verifier output after doing nothing:\n{_tail(report.nop.verifier_output)}")
        valid = report.valid
        if full and valid:
            more, valid = self._after_checks(draft, spend, parent)
            lines += more
        elif full:
            lines.append("decontamination and review: not run (checks 1-4 failed)")
        return "\n".join([f"valid: {'yes' if valid else 'no'}", *lines]), valid

    def _after_checks(self, draft: Path, spend: Spend | None, parent: Path | None) -> tuple[list[str], bool]:
        """Checks 5 and 6 on a draft that passed 1-4."""
        lines, valid = [], True
        try:
            instruction = load_task(draft, max_instruction_kb=self.validator.cfg.max_instruction_kb).instruction
        except TaskLoadError as exc:
            return [f"decontamination: the draft does not load: {exc}"], False
        overlap = self.decontaminator.check(instruction) if self.decontaminator is not None else None
        if self.decontaminator is None or self.decontaminator.empty:
            lines.append("decontamination: off (no held-out benchmark index in this run)")
        elif overlap is not None:
            lines.append(f"decontamination: FAILED\n- {overlap}")
            valid = False
        else:
            lines.append("decontamination: passed")
        if self.reviewer is None:
            lines.append("review: off in this run")
            return lines, valid
        review = self.reviewer.review(draft, parent)
        if spend is not None:
            spend(review.tokens, review.cost_usd)
        lines.append(f"review: {'passed' if review.passed else 'FAILED'}")
        lines += [f"- {reason}" for reason in review.reasons]
        return lines, valid and review.passed

    def solver_probe(self, draft: Path, attempts: int | None = None) -> str:
        if self.rollouts is None:
            return "solver_model is not available in this run"
        try:
            task = load_task(draft)
        except TaskLoadError as exc:
            return f"the draft does not load: {exc.code}: {exc}"
        task.env_id = f"{PROBE}-{content_hash(draft)[:10]}"
        # the one index, this policy's version; a human-in-the-loop draft is probed as the solver will
        # meet it (the view keeps the runner's setting and judge)
        runner = self.rollouts.at(probe_batch(self.rollouts), self.rollouts.policy_version)
        n = max(1, min(int(attempts or self.probe_attempts), 8))
        env = runner.run([task], n, show_progress=False, label="solver_model probe")[task.env_id]
        if env.build_error:
            return f"the image did not build: {env.build_error}"
        rewards = env.rewards
        mean = statistics.fmean(rewards) if rewards else None
        failures = sorted({r.failure for r in env.records if r.failure})
        return (f"solver rewards over {n} attempts: {rewards} (mean {mean})\n"
                f"failures: {'; '.join(failures) or 'none'}")

    def host_tools(self, workspace: Workspace, solver_feedback: bool = True, spend: Spend | None = None,
                   parent: Path | None = None) -> list[HostTool]:
        """The tools of the terminal harness, resolving draft paths inside ``workspace`` (no
        ``solver_model`` without ``solver_feedback``); the review's tokens go to ``spend``."""

        def validate(args: dict) -> str:
            draft = workspace.resolve_draft(args.get("path"))
            if draft is None:
                return "no draft found (write env_NNN/ first)"
            return self.validate(draft, spend=spend, parent=parent)[0]

        def solver_model(args: dict) -> str:
            draft = workspace.resolve_draft(args.get("path"))
            return "no draft found" if draft is None else self.solver_probe(draft, args.get("attempts"))

        def probe_args(rest: str) -> dict:
            words = rest.split()
            out: dict = {}
            for word in words:
                if word.isdigit():
                    out["attempts"] = int(word)
                else:
                    out["path"] = word
            return out

        tools = [HostTool(VALIDATE_SPEC, validate, lambda rest: {"path": rest} if rest else {})]
        if solver_feedback:
            tools.append(HostTool(SOLVER_SPEC, solver_model, probe_args))
        return tools
