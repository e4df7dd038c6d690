"""Admission checks 1-4 (DESIGN.md): static checks, image build, oracle == 1.0, nop < 0.5.

Every failure is a :class:`~aes.tasks.Reason` whose code starts with the stage that
failed (``static``, ``build``, ``oracle``, ``nop``), so the proposer and the reports can
group them. The oracle and no-op trials run side by side on the one built image. Each stage
logs one line with its verdict and seconds (``admission NAME: build ok (12.3 s)``).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from aes.config import SandboxConfig
from aes.sandbox import (
    AgentRun,
    Container,
    NopAgent,
    OracleAgent,
    Outcome,
    TrialResult,
    TrialRunner,
)
from aes.hil.blockers import is_hil_task, registry_reasons
from aes.sandbox.limits import clamp_notes
from aes.tasks import Reason, Task, TaskLoadError, load_task
from aes.tasks.static import check_task_with_config

log = logging.getLogger(__name__)

_TAIL = 600
RESET_SETTLE_SEC = 2.0
_NOP_UNVERIFIED = (Outcome.VERIFIER_TIMEOUT, Outcome.NO_REWARD_FILE, Outcome.BAD_REWARD_FILE)
"""Do-nothing outcomes without a reward: like Harbor, aes counts them as "< 0.5" (with a warning)."""


@dataclass
class ValidationReport:
    """The verdict of checks 1-4 on one task directory."""

    task: str
    valid: bool
    reasons: list[Reason] = field(default_factory=list)
    oracle_reward: float | None = None
    nop_reward: float | None = None
    seconds: float = 0.0
    name: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    oracle: TrialResult | None = None
    nop: TrialResult | None = None

    def to_json(self) -> dict:
        """The record ``aes validate --json`` writes for this task."""
        return {
            "task": self.task,
            "valid": self.valid,
            "reasons": [str(r) for r in self.reasons],
            "oracle_reward": self.oracle_reward,
            "nop_reward": self.nop_reward,
            "seconds": round(self.seconds, 3),
            "notes": self.notes,
        }


STATE_DIGEST = ("d=\"$1\"; for p in /app /srv /data /home /root /opt /var/lib /var/www /tmp \"$d\"; do "
                "[ -d \"$p\" ] && find \"$p\" -xdev -type f -print0 2>/dev/null; done | sort -zu | "
                "xargs -0r sha256sum 2>/dev/null | sha256sum")
"""A digest of a fresh environment's files where task state lives (for the reset check)."""


class _NopProbe(NopAgent):
    """The do-nothing agent, which also checks that the image hides the tests and solution
    (asked of the engine, not of a program in the image, whose output could say anything), and
    with ``digest`` records a digest of the fresh environment's state (the reset check)."""

    def __init__(self, digest: bool = False):
        self.digest = digest

    def run(self, task: Task, container: Container, timeout: float) -> AgentRun:
        info = {"leaked": [p for p in ("/solution", "/tests") if container.exists(p)]}
        if self.digest:
            time.sleep(RESET_SETTLE_SEC)  # let an entrypoint finish seeding its state
            out = container.exec(["sh", "-c", STATE_DIGEST, "sh", task.spec.workdir or "/app"], 120, user="0")
            info["state"] = out.output.strip() if out.exit_code == 0 else f"unreadable: {out.output.strip()[:200]}"
        return AgentRun(exit_code=0, info=info)


def _tail(text: str) -> str:
    text = text.strip()
    return ("..." + text[-_TAIL:]) if len(text) > _TAIL else text


def _trial_reasons(stage: str, trial: TrialResult) -> list[Reason]:
    """Reasons a trial's outcome (not its reward) makes the task invalid."""
    codes = {
        Outcome.AGENT_TIMEOUT: "timeout",
        Outcome.VERIFIER_TIMEOUT: "verifier_timeout",
        Outcome.NO_REWARD_FILE: "no_reward_file",
        Outcome.BAD_REWARD_FILE: "bad_reward_file",
        Outcome.CONTAINER_DIED: "container_died",
        Outcome.SANDBOX_ERROR: "sandbox_error",
        Outcome.BUILD_FAILED: "build_failed",
        Outcome.TAMPERED: "tampered",  # the tamper audit (aes/sandbox/audit.py): the run touched a start-up path
    }
    if trial.outcome is Outcome.OK:
        return []
    if stage == "oracle" and trial.outcome is Outcome.AGENT_TIMEOUT and trial.reward == 1.0:
        return []  # Harbor verifies after a timeout and counts the reward; a note says it hung
    if stage == "nop" and trial.outcome in _NOP_UNVERIFIED:
        return []
    detail = trial.detail
    if trial.outcome in (Outcome.NO_REWARD_FILE, Outcome.BAD_REWARD_FILE, Outcome.VERIFIER_TIMEOUT):
        detail += f"; verifier output: {_tail(trial.verifier_output)}" if trial.verifier_output.strip() else ""
    if trial.outcome is Outcome.AGENT_TIMEOUT and stage == "oracle":
        detail = f"solution/solve.sh did not finish: {detail}"
    if stage == "oracle":
        detail += _not_carried(trial)
    return [Reason(f"{stage}.{codes[trial.outcome]}", detail)]


def _stage(name: str, stage: str, started: float, reasons: list[Reason]) -> None:
    verdict = "ok" if not reasons else "failed: " + "; ".join(r.code for r in reasons)
    log.info("admission %s: %s %s (%.1f s)", name, stage, verdict, time.monotonic() - started)


class Validator:
    """Runs admission checks 1-4 in the Docker sandbox."""

    def __init__(self, cfg: SandboxConfig, runner: TrialRunner | None = None, nop_max_reward: float = 0.5,
                 reset_check: bool = False, domain_checks=None, nop_zero: bool = False,
                 logs_dir: Path | None = None, blocker_registry: bool = False):
        self.cfg = cfg
        if runner is None:
            from aes.sandbox.executors import trial_runner

            runner = trial_runner(cfg)  # sandbox.executor: local or ray
        self.runner = runner
        self.nop_max_reward = nop_max_reward
        self.nop_zero = nop_zero
        self.logs_dir = Path(logs_dir) if logs_dir is not None else None
        """Where the reference run's /logs/agent and /logs/artifacts go (``<logs_dir>/<task>/oracle``)."""
        """Doing nothing must earn exactly 0 (``domain.nop_zero``)."""
        self.reset_check = reset_check
        self.blocker_registry = blocker_registry
        """Every task must carry a blocker registry (``domain.blocker_registry``: human-in-the-loop)."""
        self.domain_checks = domain_checks
        """The domain's own checks (``aes/domains/<name>/checks.py``: ``checks(task_dir, runner, image)``
        -> reasons), run after checks 1-4 pass."""
        """Also start the environment twice (same initial state?) and run the reference twice (``domain.reset_check``)."""

    def describe(self) -> str:
        """What a task must pass here, in one line (the title of ``aes validate``'s table)."""
        nop = "no-op = 0" if self.nop_zero else f"no-op < {self.nop_max_reward:g}"
        extra = (", two fresh starts alike" if self.reset_check else "") + (", domain checks" if self.domain_checks else "")
        return f"admission checks 1-4 (static, build, oracle = 1, {nop}{extra})"

    def validate(self, path: str | Path) -> ValidationReport:
        start = time.monotonic()
        report = self._validate(Path(path))
        report.seconds = time.monotonic() - start
        report.valid = not report.reasons
        return report

    def _validate(self, path: Path) -> ValidationReport:
        report = ValidationReport(task=str(path), valid=False)
        started = time.monotonic()
        try:
            task = load_task(path, max_instruction_kb=self.cfg.max_instruction_kb)
        except TaskLoadError as exc:
            report.reasons.append(Reason(f"static.{exc.code}", str(exc)))
            _stage(path.name, "static", started, report.reasons)
            return report
        report.name, report.notes = task.name, list(task.spec.notes)
        report.reasons += check_task_with_config(task, self.cfg)
        if self.blocker_registry or is_hil_task(path):  # the registry is static too: checked before the build
            report.reasons += registry_reasons(path, self.blocker_registry)
        _stage(task.name, "static", started, report.reasons)
        if report.reasons:
            return report
        report.notes += clamp_notes(self.cfg, task)

        started = time.monotonic()
        build = self.runner.sandbox.build(task)
        report.timings["build"] = build.seconds
        report.notes += [f"base image substituted: {s}" for s in build.substitutions]
        if build.image is None:
            report.reasons.append(build.reason or Reason("build.failed", "the image did not build"))
        _stage(task.name, "build", started, report.reasons)
        if build.image is None:
            return report

        def trial(name: str, agent, logs: Path | None = None) -> TrialResult:
            began = time.monotonic()
            result = self.runner.run(task, agent, build.image, logs)
            what = "reference" if name == "oracle" else "doing nothing"
            reward = "no reward" if result.reward is None else f"reward {result.reward:g}"
            log.info("admission %s: %s: %s %s, %s (%.1f s)", task.name, name, what, result.outcome.value, reward,
                     time.monotonic() - began)
            return result

        with ThreadPoolExecutor(max_workers=2) as pool:
            logs = self.logs_dir / task.name.replace("/", "__") / "oracle" if self.logs_dir else None
            oracle_f = pool.submit(trial, "oracle", OracleAgent(), logs)
            nop_f = pool.submit(trial, "no-op", _NopProbe(self.reset_check))
            report.oracle, report.nop = oracle_f.result(), nop_f.result()
        if report.oracle.logs.get("dir"):
            report.notes.append(f"the reference run's logs: {report.oracle.logs['dir']} "
                                f"({report.oracle.logs['files']} files)")
        for name, trial in (("oracle", report.oracle), ("nop", report.nop)):
            for stage, seconds in trial.timings.items():
                report.timings[f"{name}.{stage}"] = seconds
        report.oracle_reward, report.nop_reward = report.oracle.reward, report.nop.reward
        report.reasons += self._judge(report.oracle, report.nop)
        if not report.reasons and is_hil_task(path):  # human-in-the-loop: every blocker must matter
            from aes.hil.admission import hil_reasons

            report.reasons += hil_reasons(path, self.runner, build.image, self.nop_max_reward)
        if not report.reasons and self.reset_check:
            report.reasons += self._reset(task, build.image, report.nop)
        if not report.reasons and self.domain_checks is not None:
            report.reasons += self.domain_checks(path, self.runner, build.image)
        report.notes += _warnings(report.oracle, report.nop)
        return report

    def _reset(self, task: Task, image: str, first_nop: TrialResult) -> list[Reason]:
        """The reset check of every domain: a second fresh environment has the same initial state,
        and the reference passes again."""
        with ThreadPoolExecutor(max_workers=2) as pool:
            oracle_f = pool.submit(self.runner.run, task, OracleAgent(), image)
            nop_f = pool.submit(self.runner.run, task, _NopProbe(True), image)
            oracle, nop = oracle_f.result(), nop_f.result()
        reasons = []
        first, second = first_nop.agent_info.get("state"), nop.agent_info.get("state")
        if first != second or str(first).startswith("unreadable"):
            reasons.append(Reason("reset.state_differs", f"two fresh environments of the task start in different "
                                                         f"states (digests {first} and {second}): its initial state "
                                                         "must not depend on time, randomness or order"))
        if oracle.reward != 1.0:
            reasons.append(Reason("reset.reference_flaky", f"the reference solution scored {oracle.reward} on its second "
                                                           f"run ({oracle.outcome.value}: {oracle.detail[:200]})"))
        return reasons

    def _judge(self, oracle: TrialResult, nop: TrialResult) -> list[Reason]:
        reasons = _trial_reasons("oracle", oracle) + _trial_reasons("nop", nop)
        leaked = nop.agent_info.get("leaked") or []
        if leaked:
            reasons.append(Reason(
                "build.secret_in_image",
                f"the image already contains {', '.join(leaked)}; solution/ and tests/ must not be in it",
            ))
        if oracle.outcome is Outcome.OK and oracle.reward is not None and oracle.reward != 1.0:
            reasons.append(Reason(
                "oracle.reward_below_one",
                f"the reference solution scores {oracle.reward:.3f}, not 1.0"
                + (f" (solve.sh exit {oracle.agent_exit_code})" if oracle.agent_exit_code else "")
                + f"; verifier output: {_tail(oracle.verifier_output)}" + _not_carried(oracle),
            ))
        if nop.outcome is Outcome.OK and nop.reward is not None and nop.reward >= self.nop_max_reward:
            reasons.append(Reason(
                "nop.reward_too_high",
                f"doing nothing scores {nop.reward:.3f} (must be < {self.nop_max_reward:g}): "
                "the tests pass without any work",
            ))
        elif self.nop_zero and nop.outcome is Outcome.OK and nop.reward:
            reasons.append(Reason(
                "nop.reward_not_zero",
                f"doing nothing scores {nop.reward:.3f} (this domain demands 0): some test section gives "
                "credit for an untouched environment; gate it on the work being done",
            ))
        return reasons


ENGINE_PATHS = frozenset({"/usr", "/usr/sbin", "/usr/sbin/docker-init"})
"""What the engine itself leaves in a container's layer (``docker-init``'s mount point)."""


def _not_carried(oracle: TrialResult) -> str:
    """Why a reference may fail only under the sealed verifier: the changes it made that were not
    carried to the tests (software installed, the image's tools or their settings changed)."""
    examples = oracle.agent_info.get("not_carried") or {}
    paths = [(path, why) for why, found in examples.items() for path in found
             if path not in ENGINE_PATHS and not path.startswith(("/logs", "/solution"))]
    shown = [f"{path} ({why})" for path, why in paths  # the deepest paths: a directory says little
             if not any(other.startswith(path.rstrip("/") + "/") for other, _ in paths)]
    if not shown:
        return ""
    return ("; the sealed verifier (sandbox.trusted_verifier) did not carry these changes of the reference to the "
            f"tests: {', '.join(shown[:5])}. A task whose reference installs software or changes the image's tools "
            "passes only with in-place verification (sandbox.trusted_verifier=false), where an agent can tamper "
            "with the tests' tools too; a task whose work is files (outputs, code, configuration) needs neither")


def _warnings(oracle: TrialResult, nop: TrialResult) -> list[str]:
    """What passes admission but costs every solver attempt time."""
    notes = []
    if oracle.outcome is Outcome.AGENT_TIMEOUT:
        notes.append(f"warning: solution/solve.sh ran into its timeout ({oracle.detail}); the tests passed anyway")
    if nop.outcome in _NOP_UNVERIFIED:
        notes.append(f"warning: with no work done the verifier gives no reward ({nop.outcome.value}: {nop.detail}); "
                     "Harbor counts that as below 0.5, and so does aes, but every such solver attempt "
                     "costs the verifier's full run")
    return notes


def validate_all(validator: Validator, paths: list[Path], concurrency: int,
                 show_progress: bool = True) -> list[ValidationReport]:
    """Validate many tasks at once (in input order), with a progress bar."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    reports: list[ValidationReport | None] = [None] * len(paths)
    columns = (TextColumn("validating"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[invalid]} invalid"), TimeElapsedColumn())
    with Progress(*columns, disable=not show_progress, transient=False) as progress:
        bar = progress.add_task("validate", total=len(paths), invalid=0)
        invalid = 0
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            futures = {pool.submit(validator.validate, p): i for i, p in enumerate(paths)}
            for future in as_completed(futures):
                index = futures[future]
                reports[index] = future.result()
                invalid += not reports[index].valid
                progress.update(bar, advance=1, invalid=invalid)
    return [r for r in reports if r is not None]
