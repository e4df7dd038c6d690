"""Admission checks 1-4 (DESIGN.md): static checks, image build, oracle == 1.0, nop < 0.5.

Every failure is a :class:`~aes.tasks.Reason` whose code starts with the stage that
failed (``static``, ``build``, ``oracle``, ``nop``), so the proposer and the reports can
group them. The oracle and no-op trials run side by side on the one built image. Each stage
logs one line with its verdict and seconds (``admission NAME: build ok (12.3 s)``).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import docker.errors

from aes.config import AdmissionConfig, SandboxConfig
from aes.errors import InfrastructureError
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
from aes.sandbox import limits
from aes.sandbox.docker_backend import SandboxError
from aes.sandbox.hooks import HookInspector
from aes.sandbox.limits import clamp_notes
from aes.sandbox.trial import admission_code, printable
from aes.tasks import Reason, Task, TaskLoadError, load_task
from aes.tasks.static import check_task_with_config

log = logging.getLogger(__name__)

_TAIL = 600
RESET_SETTLE_SEC = 2.0
_NOP_UNVERIFIED = (Outcome.VERIFIER_TIMEOUT, Outcome.NO_REWARD_FILE, Outcome.BAD_REWARD_FILE)
"""Do-nothing outcomes without a reward: like Harbor, aes counts them as "< 0.5" (with a warning),
except a do-nothing run whose tests were cut by admission's bound (``nop.verifier_timeout``)."""


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
    """Reasons a trial's outcome (not its reward) makes the task invalid: every outcome but ``ok``
    is one (:func:`~aes.sandbox.trial.admission_code` names it; no outcome can be missing)."""
    if trial.outcome is Outcome.OK:
        return []
    if stage == "oracle" and trial.outcome is Outcome.AGENT_TIMEOUT and trial.reward == 1.0:
        return []  # Harbor verifies after a timeout and counts the reward; a note says it hung
    if stage == "nop" and trial.outcome in _NOP_UNVERIFIED:
        return []  # judged by Validator._nop_cut (a timeout) or accepted with a warning, as Harbor does
    detail = trial.detail
    if trial.outcome in (Outcome.NO_REWARD_FILE, Outcome.BAD_REWARD_FILE, Outcome.VERIFIER_TIMEOUT):
        detail += f"; verifier output: {_tail(trial.verifier_output)}" if trial.verifier_output.strip() else ""
    if trial.outcome is Outcome.AGENT_TIMEOUT and stage == "oracle":
        detail = f"solution/solve.sh did not finish: {detail}"
    if stage == "oracle":
        detail += _not_carried(trial)
    return [Reason(f"{stage}.{admission_code(trial.outcome)}", detail)]


def _stage(name: str, stage: str, started: float, reasons: list[Reason]) -> None:
    verdict = "ok" if not reasons else "failed: " + "; ".join(r.code for r in reasons)
    log.info("admission %s: %s %s (%.1f s)", name, stage, verdict, time.monotonic() - started)


class Validator:
    """Runs admission checks 1-4 in the Docker sandbox."""

    def __init__(self, cfg: SandboxConfig, runner: TrialRunner | None = None, nop_max_reward: float = 0.5,
                 reset_check: bool = False, domain_checks=None, nop_zero: bool = False,
                 logs_dir: Path | None = None, blocker_registry: bool = False,
                 admission: AdmissionConfig | None = None, generated: bool = False):
        self.cfg = cfg
        self.admission = admission or AdmissionConfig()
        """Admission's time bounds (``admission.max_*_sec``, the do-nothing run's verifier bound)."""
        self._inspector: HookInspector | None = None
        self.generated = generated
        """The tasks are proposals (a run's admission, the proposer's validate tool): a prebuilt
        ``docker_image`` is refused, since only a Dockerfile's build is what the static checks read."""
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
        """The verdict of checks 1-4 on one task directory. Whatever the task holds, this returns a
        verdict: an error of aes itself on it becomes the reason ``internal.error`` (logged with its
        traceback); only an :class:`~aes.errors.InfrastructureError` (the engine, the disk) is raised."""
        start = time.monotonic()
        try:
            report = self._validate(Path(path))
        except InfrastructureError:
            raise
        except Exception as exc:  # noqa: BLE001 - logged with its traceback, and the task gets a verdict
            log.exception("admission %s: aes failed while checking it", Path(path).name)
            report = ValidationReport(task=str(path), valid=False)
            report.reasons.append(internal_error(exc))
        # names read from the task or a container may not be UTF-8: the verdict must print and save
        report.reasons = [Reason(r.code, printable(r.message)) for r in report.reasons]
        report.notes = printable(report.notes)
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
        if task.spec.docker_image and self.generated:
            report.reasons.append(Reason("static.docker_image", (
                f"[environment] docker_image = {task.spec.docker_image!r}: a proposed task builds its image from "
                "environment/Dockerfile, which admission reads; a prebuilt image is not what the static checks saw")))
        elif task.spec.docker_image:
            report.notes.append(f"the task runs the prebuilt image {task.spec.docker_image} (environment/Dockerfile, "
                                "if any, is not built); its start-up hooks were inspected like a built image's")
        if self.blocker_registry or is_hil_task(path):  # the registry is static too: checked before the build
            report.reasons += registry_reasons(path, self.blocker_registry)
        _stage(task.name, "static", started, report.reasons)
        if report.reasons:
            return report
        report.notes += clamp_notes(self.cfg, task)
        task, bounded = self._bounded(task)
        report.notes += bounded

        started = time.monotonic()
        build = self.runner.sandbox.build(task)
        report.timings["build"] = build.seconds
        report.notes += [f"base image substituted: {s}" for s in build.substitutions]
        if build.image is None:
            report.reasons.append(build.reason or Reason("build.failed", "the image did not build"))
        _stage(task.name, "build", started, report.reasons)
        if build.image is None:
            return report

        def trial(name: str, agent, logs: Path | None = None, on: Task = task) -> TrialResult:
            began = time.monotonic()
            result = self.runner.run(on, agent, build.image, logs)
            what = "reference" if name == "oracle" else "doing nothing"
            reward = "no reward" if result.reward is None else f"reward {result.reward:g}"
            log.info("admission %s: %s: %s %s, %s (%.1f s)", task.name, name, what, result.outcome.value, reward,
                     time.monotonic() - began)
            return result

        # The do-nothing run's tests are bounded by the reference's test time: both runs start together
        # with the do-nothing tests given the floor, and only where the reference's tests turn out
        # slow enough to earn a longer bound is a do-nothing run cut at the floor run again with it.
        nop_first = self._with_verifier_timeout(task, self._nop_bound(task, None))
        with ThreadPoolExecutor(max_workers=3) as pool:  # the image's start-up hooks are inspected meanwhile
            logs = self.logs_dir / task.name.replace("/", "__") / "oracle" if self.logs_dir else None
            hooks_f = pool.submit(self._hooks, build.image, build.base, task, report)
            oracle_f = pool.submit(trial, "oracle", OracleAgent(), logs)
            nop_f = pool.submit(trial, "no-op", _NopProbe(self.reset_check), None, nop_first)
            report.oracle, report.nop = oracle_f.result(), nop_f.result()
            report.reasons += hooks_f.result()
        bound = self._nop_bound(task, report.oracle.timings.get("tests"))
        if report.nop.outcome is Outcome.VERIFIER_TIMEOUT and bound > limits.verifier_timeout(self.cfg, nop_first):
            report.nop = trial("no-op", _NopProbe(self.reset_check), None, self._with_verifier_timeout(task, bound))
        if report.oracle.logs.get("dir"):
            report.notes.append(f"the reference run's logs: {report.oracle.logs['dir']} "
                                f"({report.oracle.logs['files']} files)")
        for name, trial in (("oracle", report.oracle), ("nop", report.nop)):
            for stage, seconds in trial.timings.items():
                report.timings[f"{name}.{stage}"] = seconds
        report.oracle_reward, report.nop_reward = report.oracle.reward, report.nop.reward
        report.reasons += self._judge(report.oracle, report.nop)
        report.reasons += self._nop_cut(task, report.nop, bound)
        if not report.reasons and is_hil_task(path):  # human-in-the-loop: every blocker must matter
            from aes.hil.admission import hil_reasons

            report.reasons += hil_reasons(path, self.runner, build.image, self.nop_max_reward)
        if not report.reasons and self.reset_check:
            report.reasons += self._reset(task, build.image, report.nop)
        if not report.reasons and self.domain_checks is not None:
            report.reasons += self.domain_checks(path, self.runner, build.image)
        report.notes += _warnings(report.oracle, report.nop, cut=any(r.code == "nop.verifier_timeout" for r in report.reasons))
        return report

    def _hooks(self, image: str, base: str | None, task: Task, report: ValidationReport) -> list[Reason]:
        """Start-up hooks of the built image that load what the agent can write (:mod:`aes.sandbox.hooks`)."""
        if self._inspector is None:
            sandbox = self.runner.sandbox
            if not hasattr(sandbox, "run_container"):
                report.notes.append("the image's start-up hooks were not inspected (no Docker sandbox here)")
                return []
            self._inspector = HookInspector(sandbox)
        began = time.monotonic()
        try:
            reasons = self._inspector.reasons(image, base, task)
        except (SandboxError, docker.errors.APIError) as exc:
            # an image that cannot start a shell (its trials say so), or one built on another engine (a Ray node)
            report.notes.append(f"the image's start-up hooks could not be inspected: {exc}")
            reasons = []
        report.timings["hooks"] = time.monotonic() - began
        return reasons

    def _bounded(self, task: Task) -> tuple[Task, list[str]]:
        """``task`` with its build, reference and test timeouts bounded by ``admission.max_*_sec``
        (checks 1-4 end in bounded time whatever a task declares), and a note per bound applied."""
        bounds = self.admission
        spec, notes = task.spec, []
        for key, value, bound, setting in (
                ("build_timeout_sec", limits.build_timeout(self.cfg, task), bounds.max_build_sec, "max_build_sec"),
                ("agent_timeout_sec", limits.agent_timeout(self.cfg, task), bounds.max_reference_sec,
                 "max_reference_sec"),
                ("verifier_timeout_sec", limits.verifier_timeout(self.cfg, task), bounds.max_verifier_sec,
                 "max_verifier_sec")):
            if value > bound:
                spec = dataclasses.replace(spec, **{key: float(bound)})
                notes.append(f"admission gives {key.replace('_sec', '').replace('_', ' ')} {bound:g} s, not "
                             f"{value:g} s (admission.{setting})")
        return (dataclasses.replace(task, spec=spec) if spec is not task.spec else task), notes

    @staticmethod
    def _with_verifier_timeout(task: Task, seconds: float) -> Task:
        return dataclasses.replace(task, spec=dataclasses.replace(task.spec, verifier_timeout_sec=float(seconds)))

    def _nop_bound(self, task: Task, oracle_tests: float | None) -> float:
        """The do-nothing run's test time: ``nop_verifier_factor`` x the reference's (at least the
        floor), never more than the task's own verifier timeout."""
        bounds = self.admission
        earned = max(bounds.nop_verifier_floor_sec, bounds.nop_verifier_factor * (oracle_tests or 0.0))
        return min(limits.verifier_timeout(self.cfg, task), earned)

    def _nop_cut(self, task: Task, nop: TrialResult, bound: float) -> list[Reason]:
        """A do-nothing run whose tests were cut by admission's bound (rather than by a declared
        [verifier] timeout_sec within it, which Harbor waits out too) is a rejection."""
        declared = limits.verifier_timeout(self.cfg, task)
        if nop.outcome is not Outcome.VERIFIER_TIMEOUT or declared <= bound:
            return []
        return [Reason("nop.verifier_timeout", (
            f"the tests do not end when the work is missing: with nothing done they ran past {bound:.0f} s "
            f"(admission.nop_verifier_factor x the reference's test time, at least admission.nop_verifier_floor_sec), "
            f"so every failing solver attempt would wait out [verifier] timeout_sec = {declared:g} s; make them "
            f"fail fast when an output is missing. Verifier output: {_tail(nop.verifier_output)}"))]

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
        if oracle.outcome is Outcome.OK and oracle.reward != 1.0:
            reasons.append(Reason(
                "oracle.reward_below_one",
                f"the reference solution scores {'nothing' if oracle.reward is None else f'{oracle.reward:.3f}'}, not 1.0"
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


def _warnings(oracle: TrialResult, nop: TrialResult, cut: bool = False) -> list[str]:
    """What passes admission but costs every solver attempt time (``cut``: the do-nothing run's
    timeout is a rejection already)."""
    notes = []
    if oracle.outcome is Outcome.AGENT_TIMEOUT:
        notes.append(f"warning: solution/solve.sh ran into its timeout ({oracle.detail}); the tests passed anyway")
    if nop.outcome in _NOP_UNVERIFIED and not cut:
        notes.append(f"warning: with no work done the verifier gives no reward ({nop.outcome.value}: {nop.detail}); "
                     "Harbor counts that as below 0.5, and so does aes, but every such solver attempt "
                     "costs the verifier's full run")
    return notes


def internal_error(exc: BaseException) -> Reason:
    """The reason a task gets when aes itself failed on it (the traceback is logged)."""
    return Reason("internal.error", f"aes failed while checking this task ({type(exc).__name__}: {str(exc)[:300]}); "
                                    "it is not admitted. The traceback is in the log: please report it")


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
                try:
                    reports[index] = future.result()
                except InfrastructureError as exc:  # one task's verdict; the batch goes on
                    log.error("admission %s: %s", paths[index], exc)
                    reports[index] = ValidationReport(task=str(paths[index]), valid=False, reasons=[
                        Reason("infrastructure.error", f"{type(exc).__name__}: {exc}")])
                invalid += not reports[index].valid
                progress.update(bar, advance=1, invalid=invalid)
    return [r for r in reports if r is not None]
