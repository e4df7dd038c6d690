"""Host-side tools of the proposer: ``validate`` (checks 1-4 on a draft) and ``solver_model``.

A ``solver_model`` probe is a batch of the run's solver rollouts like any other: its attempts
land in the one trajectory index (``trajectories/index.jsonl``) under the env id
``probe-<content hash of the draft>`` and the batch ``<current batch>-probe``, with the policy
version of the solver that ran them. A draft probed again under the same policy reuses those
attempts; under a newer policy it is attempted afresh (another batch), never answered with an
older policy's rewards. Probe envs are not in the pool, so they never train the solver."""

from __future__ import annotations

import statistics
from pathlib import Path

from aes.admission import Validator
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
    description="Build your draft task and run its reference solution and a do-nothing run "
                "(the oracle must score 1.0, doing nothing below 0.5). Returns the verdict and logs.",
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


class ProposerTools:
    def __init__(self, validator: Validator, rollouts: RolloutRunner | None, probe_attempts: int):
        self.validator = validator
        self.rollouts = rollouts
        self.probe_attempts = probe_attempts

    def validate(self, draft: Path) -> tuple[str, bool]:
        """A readable verdict of checks 1-4 on ``draft`` and whether it passed."""
        report = self.validator.validate(draft)
        lines = [f"valid: {'yes' if report.valid else 'no'}; oracle reward {report.oracle_reward}; "
                 f"do-nothing reward {report.nop_reward}"]
        lines += [f"- {reason}" for reason in report.reasons]
        if report.oracle is not None:
            lines.append(f"solve.sh output:\n{_tail(report.oracle.agent_output)}")
            lines.append(f"verifier output after the oracle:\n{_tail(report.oracle.verifier_output)}")
        return "\n".join(lines), report.valid

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

    def host_tools(self, workspace: Workspace) -> list[HostTool]:
        """The tools of the terminal harness, resolving draft paths inside ``workspace``."""

        def validate(args: dict) -> str:
            draft = workspace.resolve_draft(args.get("path"))
            return "no draft found (write env_NNN/ first)" if draft is None else self.validate(draft)[0]

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

        return [HostTool(VALIDATE_SPEC, validate, lambda rest: {"path": rest} if rest else {}),
                HostTool(SOLVER_SPEC, solver_model, probe_args)]
