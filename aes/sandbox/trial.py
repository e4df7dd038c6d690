"""Trials with Harbor's semantics: an agent phase in a container, then the verifier.

* oracle: upload ``solution/`` to ``/solution``, run ``solve.sh`` (agent timeout applies);
* nop: do nothing;
* an agent: anything implementing :class:`TrialAgent` (the terminal agent);
* verify: ``tests/`` goes to ``/tests``, ``test.sh`` runs, then ``reward.json`` (flat dict of
  numbers, key ``reward``) or else ``reward.txt`` (one float) is read. No reward file is an
  outcome, not a zero.

As in Harbor, the verifier still runs after the agent phase times out. With
``sandbox.trusted_verifier`` (the default) it runs sealed, in a fresh container of the task's
pristine image that receives the agent's file changes (:mod:`aes.sandbox.verifier` states the
guarantee); ``false`` verifies in the agent's own container, exactly as Harbor does.

Outcomes (:class:`Outcome`) are exhaustive. ``ok`` and ``agent_timeout`` carry the reward the
tests wrote. The outcomes in :data:`AGENT_BROKE` mean the agent's container or the verification
of its work broke while the agent had control (or because of what it left): a solver attempt
scores 0 for them. The outcomes in :data:`INFRASTRUCTURE` are failures of what aes runs on (the
Docker engine, a model server): never a reward, counted, and named in metrics.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import tarfile
import threading
import time
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Protocol

import docker.errors

from aes.config import SandboxConfig
from aes.sandbox.container import Container, ExecResult, tar_entries
from aes.sandbox.docker_backend import DockerSandbox, SandboxError
from aes.errors import InfrastructureError
from aes.sandbox import limits
from aes.sandbox.carry import CarryError
from aes.sandbox.engine import SHUTDOWN_GRACE_SEC
from aes.sandbox.verifier import SealedVerifier
from aes.tasks import Task

log = logging.getLogger(__name__)

LOG_DIRS = ("logs", "logs/agent", "logs/verifier", "logs/artifacts")
REWARD_TXT = "/logs/verifier/reward.txt"
REWARD_JSON = "/logs/verifier/reward.json"


class Outcome(str, Enum):
    """How a trial ended. Only ``ok`` and ``agent_timeout`` carry a reward."""

    OK = "ok"
    """Verified: the reward is what tests/test.sh wrote."""
    AGENT_TIMEOUT = "agent_timeout"
    """The agent phase hit [agent] timeout_sec; verified anyway (Harbor does the same)."""
    BUILD_FAILED = "build_failed"
    """The image did not build: the task's fault; no attempt ran."""
    VERIFIER_TIMEOUT = "verifier_timeout"
    """tests/test.sh ran past [verifier] timeout_sec."""
    NO_REWARD_FILE = "no_reward_file"
    """tests/test.sh wrote neither reward.json nor reward.txt."""
    BAD_REWARD_FILE = "bad_reward_file"
    """The reward file does not hold a finite number (reward.json: a flat object of them)."""
    CONTAINER_DIED = "container_died"
    """The agent's container stopped during the agent phase (OOM, its init killed, ...)."""
    STORAGE_EXCEEDED = "storage_exceeded"
    """The agent wrote more than the task's storage limit (killed by the watchdog), or its
    changes were too many or too large to carry to the verifier."""
    CARRY_FAILED = "carry_failed"
    """The agent's files could not be read out of its container or written into the verifier's."""
    SANDBOX_ERROR = "sandbox_error"
    """The Docker engine refused or failed (infrastructure)."""
    INFRA_ERROR = "infra_error"
    """Something the agent depends on failed (e.g. its model server is unreachable)."""
    # -- the tamper audit (aes/sandbox/audit.py) --
    TAMPERED = "tampered"
    """The tamper audit saw the verifier run one of the agent's carried files as code where the
    reference solution's verification ran none, or touch a start-up or loader path: no reward
    (a solver attempt scores 0), the paths in ``detail``."""


REWARDED, AGENT, TASK, INFRA = "rewarded", "agent", "task", "infrastructure"
"""What an outcome means for a score (the kinds of :data:`OUTCOME_KINDS`)."""

OUTCOME_KINDS: dict[Outcome, str] = {
    Outcome.OK: REWARDED,
    Outcome.AGENT_TIMEOUT: REWARDED,
    Outcome.BUILD_FAILED: TASK,
    Outcome.SANDBOX_ERROR: INFRA,
    Outcome.INFRA_ERROR: INFRA,
}
"""Each outcome's kind: ``rewarded`` (the tests' reward counts), ``task`` (the task is broken; no
attempt ran), ``infrastructure`` (never a reward, counted apart); every other outcome, listed here
or not, is ``agent``: the agent's container or the verification of its work broke while the agent
had control (or because of what it left), and a solver attempt scores 0 for it. So a new outcome
needs no line here unless it is not the agent's doing, and none can fall through a table."""


def outcome_kind(outcome: Outcome) -> str:
    """The kind of ``outcome`` (:data:`OUTCOME_KINDS`; ``agent`` for any outcome not listed)."""
    return OUTCOME_KINDS.get(outcome, AGENT)


_ADMISSION_CODES = {Outcome.AGENT_TIMEOUT: "timeout"}


def admission_code(outcome: Outcome) -> str:
    """The reason code admission gives a trial that ended so (``oracle.<code>``): the outcome's own
    name, ``timeout`` for the agent phase's."""
    return _ADMISSION_CODES.get(outcome, outcome.value)


AGENT_BROKE = frozenset(o for o in Outcome if outcome_kind(o) == AGENT)
"""Outcomes of a task that passed admission which only what the agent did can cause: in a
solver attempt they score 0, so breaking the verifier never escapes a low reward."""
INFRASTRUCTURE = frozenset(o for o in Outcome if outcome_kind(o) == INFRA)
"""Failures of the infrastructure: never a reward, counted apart."""


@dataclass
class AgentRun:
    """What an agent did in the container."""

    exit_code: int | None = None
    output: str = ""
    timed_out: bool = False
    info: dict = field(default_factory=dict)


class TrialAgent(Protocol):
    """Acts in a task's container during the agent phase."""

    name: str

    def run(self, task: Task, container: Container, timeout: float) -> AgentRun: ...


class NopAgent:
    """Does nothing: the do-nothing baseline of admission check 4."""

    name = "nop"

    def run(self, task: Task, container: Container, timeout: float) -> AgentRun:
        return AgentRun(exit_code=0)


class OracleAgent:
    """Runs the reference solution, as Harbor's oracle agent does."""

    name = "oracle"

    def run(self, task: Task, container: Container, timeout: float) -> AgentRun:
        container.upload_dir(task.solution_dir, "/solution", executable=("solve.sh",))
        env = {"DEBIAN_FRONTEND": "noninteractive", **task.spec.solution_env}
        result = container.exec(["bash", "-c", "/solution/solve.sh"], timeout, env=env, user=task.spec.agent_user)
        return _agent_run(result)


def _agent_run(result: ExecResult) -> AgentRun:
    return AgentRun(exit_code=result.exit_code, output=result.output, timed_out=result.timed_out)


@dataclass
class TrialResult:
    """One agent phase + verification on a fresh container."""

    task: str
    agent: str
    outcome: Outcome
    reward: float | None = None
    rewards: dict[str, float] = field(default_factory=dict)
    detail: str = ""
    agent_exit_code: int | None = None
    agent_output: str = ""
    verifier_exit_code: int | None = None
    verifier_output: str = ""
    image: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    agent_info: dict = field(default_factory=dict)
    logs: dict = field(default_factory=dict)
    """Where the trial's /logs/agent and /logs/artifacts were copied (``dir``, ``files``, ``bytes``),
    or why not (``note``); empty when no copy was asked for."""

    def to_dict(self) -> dict:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        return data


REWARD_FILE_MAX_BYTES = 1 << 20
"""Largest reward file read (an honest one is a few bytes; a larger one is a bad reward file)."""


def parse_reward_json(data: bytes) -> dict[str, float]:
    """reward.json: a flat object of finite numbers with a ``reward`` key.

    Raises ValueError (never anything else) for whatever else the bytes hold: not UTF-8, not
    JSON, nested too deeply for the parser, not an object, NaN, infinities, numbers too large
    for a float, booleans, strings, nested values."""
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:200]
        raise ValueError(f"reward.json is not JSON: {why}") from None
    if not isinstance(value, dict) or "reward" not in value:
        raise ValueError(f"reward.json must be an object with a 'reward' key, got {_kind(value)}")
    out = {}
    for key, number in value.items():
        out[str(key)] = _finite(number, f"reward.json value {str(key)[:80]!r}")
    return out


def parse_reward_txt(data: bytes) -> dict[str, float]:
    """reward.txt: one finite float (raises ValueError for anything else)."""
    try:
        text = data.decode("utf-8").strip()
        value = float(text)
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"reward.txt does not hold one number: {data[:80]!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"reward.txt holds a non-finite number {value}")
    return {"reward": value}


def _finite(number, what: str) -> float:
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        raise ValueError(f"{what} is {_kind(number)}, not a number")
    try:
        value = float(number)
    except OverflowError:
        raise ValueError(f"{what} is too large for a float") from None
    if not math.isfinite(value):
        raise ValueError(f"{what} = {value} is not a finite number")
    return value


def _kind(value) -> str:
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'} of {len(value)} entries"
    return f"{type(value).__name__} {str(value)[:80]!r}"


_GO_TYPE_BITS = (1 << 31) | (1 << 27) | (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (1 << 19)
"""Go's os.FileMode type bits (dir, symlink, device, pipe, socket, char device, irregular) in the
engine's stat of a container path: none set means a regular file."""


def read_rewards(container: Container) -> dict[str, float] | None:
    """The rewards the tests wrote: reward.json, else reward.txt; None when neither exists.

    Raises ValueError when the file that counts is not a regular file of at most
    :data:`REWARD_FILE_MAX_BYTES` or does not parse (a reward.json that cannot be read never
    lets reward.txt count instead)."""
    for path, parse in ((REWARD_JSON, parse_reward_json), (REWARD_TXT, parse_reward_txt)):
        info = container.stat(path)
        if info is None:
            continue
        name = path.rsplit("/", 1)[-1]
        if int(info.get("mode") or 0) & _GO_TYPE_BITS:
            raise ValueError(f"{name} is not a regular file (a link, directory, pipe or device)")
        size = int(info.get("size") or 0)
        if size > REWARD_FILE_MAX_BYTES:
            raise ValueError(f"{name} is {size} bytes; a reward file holds at most {REWARD_FILE_MAX_BYTES}")
        raw = container.read_file(path, limit=REWARD_FILE_MAX_BYTES)
        if raw is None:
            raise ValueError(f"{name} changed or vanished while it was read")
        return parse(raw)
    return None


_MAYBE_ENGINE = (Outcome.CONTAINER_DIED, Outcome.SANDBOX_ERROR)
"""Outcomes that a stopping Docker engine causes (besides errors from the engine's API)."""


class TrialRunner:
    """Runs trials of tasks in the Docker sandbox."""

    def __init__(self, cfg: SandboxConfig, sandbox: DockerSandbox | None = None):
        self.cfg = cfg
        self.sandbox = sandbox or DockerSandbox(cfg)
        self.verifier = SealedVerifier(self.sandbox, cfg)

    def run(self, task: Task, agent: TrialAgent, image: str | None = None,
            logs_to: Path | None = None) -> TrialResult:
        """Build (unless ``image`` is given), start, run the agent, verify, tear down.

        ``logs_to``: a directory to copy the agent's /logs/agent and /logs/artifacts into
        (screenshots, logs an agent or a reference keeps) once the agent phase is over.

        A trial that ends without a reward because the Docker engine went away (a restart
        stops every container) waits for the engine and runs again in a new container, up to
        ``sandbox.engine_retries`` times; a reward already earned is kept.
        """
        def suspect(result: TrialResult) -> float | None:
            if result.reward is not None:
                return None
            return SHUTDOWN_GRACE_SEC if result.outcome in _MAYBE_ENGINE else 0.0

        result, retries = self.sandbox.through_restarts(f"{task.name}: trial",
                                                        lambda: self._run_once(task, agent, image, logs_to),
                                                        suspect,
                                                        cfg=self.cfg)
        if retries:
            result.detail = (result.detail + f" (run {retries + 1} times: the Docker engine went away "
                             "during the earlier runs)").strip()
        return result

    def _run_once(self, task: Task, agent: TrialAgent, image: str | None, logs_to: Path | None = None) -> TrialResult:
        timings: dict[str, float] = {}
        result = TrialResult(task=task.name, agent=agent.name, outcome=Outcome.OK)
        if image is None:
            build = self.sandbox.build(task)
            timings["build"] = build.seconds
            if build.image is None:
                result.outcome = Outcome.BUILD_FAILED
                result.detail = str(build.reason)
                result.timings = timings
                return result
            image = build.image
        result.image = image
        clock = time.monotonic()
        containers: list[Container] = []
        try:
            sealed = self.cfg.trusted_verifier
            pristine = _Background(lambda: self.verifier.start(image, task)) if sealed else None
            container = self.sandbox.start(image, task)
            containers.append(container)
            timings["start"] = time.monotonic() - clock
            self._agent_phase(container, task, agent, result, timings)
            if logs_to is not None:
                result.logs = self._keep_logs(container, Path(logs_to))
            if result.outcome in (Outcome.OK, Outcome.AGENT_TIMEOUT):
                clock = time.monotonic()
                if pristine is not None:
                    verifier = pristine.get()
                    containers.append(verifier)
                    self._verify_sealed(container, verifier, image, task, result, timings)
                else:
                    self._verify_in_place(container, task, result)
                timings["verify"] = time.monotonic() - clock
            elif pristine is not None:
                containers.append(pristine.get())
        except InfrastructureError as exc:
            result.outcome, result.detail, result.reward = _infra_outcome(exc), str(exc), None
        except docker.errors.APIError as exc:
            state, code, oom = containers[0].status() if containers else ("removed", None, False)
            if containers and state not in ("running", "paused"):
                result.outcome, result.detail = Outcome.CONTAINER_DIED, _died(state, code, oom, containers[0])
            else:
                result.outcome, result.detail = Outcome.SANDBOX_ERROR, f"docker error: {exc}"
            result.reward = None
        except Exception as exc:  # noqa: BLE001 - logged with its traceback; the trial still ends with an outcome
            log.exception("%s: the trial failed inside aes", task.name)
            result.outcome, result.reward = Outcome.INFRA_ERROR, None
            result.detail = (f"aes failed while running the trial ({type(exc).__name__}: {str(exc)[:300]}); "
                             "not a reward. The traceback is in the log: please report it")
        finally:
            clock = time.monotonic()
            for box in containers:
                self.sandbox.discard(box)
            if pristine is not None:
                pristine.discard(self.sandbox)
            timings["teardown"] = time.monotonic() - clock
            result.timings = {**result.timings, **timings}
            result.detail, result.agent_info = printable(result.detail), printable(result.agent_info)
        return result

    def _agent_phase(self, container: Container, task: Task, agent: TrialAgent, result: TrialResult,
                     timings: dict[str, float]) -> None:
        container.put_archive(tar_entries({d: None for d in LOG_DIRS}))
        clock = time.monotonic()
        timeout = limits.agent_timeout(self.cfg, task)
        run = agent.run(task, container, timeout)
        timings["agent"] = time.monotonic() - clock
        result.agent_exit_code, result.agent_output = run.exit_code, run.output
        result.agent_info = run.info
        if run.timed_out:
            result.outcome = Outcome.AGENT_TIMEOUT
            result.detail = f"agent phase exceeded {timeout:.0f} s ([agent] timeout_sec)"
        over = self.sandbox.storage.exceeded(container)
        if over:
            result.outcome = Outcome.STORAGE_EXCEEDED
            result.detail = (f"the agent wrote {over[0] >> 20} MiB, over the task's storage limit of "
                             f"{over[1] >> 20} MiB ([environment] storage_mb)")
            return
        state, code, oom = container.status()
        if state != "running":
            result.outcome, result.detail = Outcome.CONTAINER_DIED, _died(state, code, oom, container)

    def _keep_logs(self, container: Container, dest: Path) -> dict:
        """Copy /logs/agent and /logs/artifacts out of the agent's container (plain files only, at
        most ``sandbox.trial_logs_max_mb``); a directory that ends up empty is not kept."""
        limit = self.cfg.trial_logs_max_mb << 20
        notes = []
        for part in ("agent", "artifacts"):
            try:
                if not container.download(f"/logs/{part}", dest, limit=limit):
                    notes.append(f"/logs/{part} is over sandbox.trial_logs_max_mb ({self.cfg.trial_logs_max_mb} MiB) "
                                 "or gone; not kept")
            except (docker.errors.APIError, OSError, tarfile.TarError, UnicodeError) as exc:
                notes.append(f"/logs/{part} could not be copied: {exc!r}"[:500])
        files = [p for p in dest.rglob("*") if p.is_file() and not p.is_symlink()] if dest.is_dir() else []
        if not files and dest.is_dir():
            shutil.rmtree(dest, ignore_errors=True)
        info = {"dir": str(dest), "files": len(files), "bytes": sum(p.lstat().st_size for p in files)} if files else {}
        return {**info, **({"note": "; ".join(notes)} if notes else {})}

    def _verify_sealed(self, container: Container, verifier: Container, image: str, task: Task,
                       result: TrialResult, timings: dict[str, float]) -> None:
        """Carry the agent's changes into the pristine ``verifier`` container and run the tests there."""
        clock = time.monotonic()
        user = self.verifier.user_for(image, task, verifier)
        home = self.verifier.home_of(image, verifier, user)  # read before the agent's files arrive
        try:
            carry = self.verifier.collect(container, image, task, verifier, user)
        except CarryError as exc:
            result.outcome, result.detail = Outcome.STORAGE_EXCEEDED, str(exc)
            return
        except (InfrastructureError, docker.errors.APIError):
            raise
        except Exception as exc:  # noqa: BLE001 - what the agent left could not be read: its attempt, not the run
            log.exception("%s: the agent's changes could not be read", task.name)
            result.outcome, result.detail = Outcome.CARRY_FAILED, f"the agent's changes could not be read: {exc!r}"
            return
        try:
            self.sandbox.discard(container)
            timings["carry"] = time.monotonic() - clock
            problem = self.verifier.prepare(verifier, task, carry)
        finally:
            carry.close()
        result.agent_info = {**result.agent_info, "carried": carry.summary(), "not_carried": carry.examples}
        if problem:
            result.outcome, result.detail = Outcome.CARRY_FAILED, problem
            return
        # the tamper audit watches the verifier's file system while the tests run (aes/sandbox/audit.py)
        with self.verifier.audit(verifier, image, user, carry) as watch:
            self._run_tests(verifier, task, result, self.verifier.command(), user=user, workdir="/tests",
                            env=self.verifier.env(task, home))
        result.agent_info["audit"] = watch.record.to_dict()
        result.timings["audit"] = watch.record.seconds
        # a tests' run that loaded the agent's files is tampered with whatever it left as a reward file
        if result.outcome in (Outcome.OK, Outcome.AGENT_TIMEOUT, Outcome.BAD_REWARD_FILE, Outcome.NO_REWARD_FILE):
            reasons = self.verifier.tampering(task, image, watch.record, result.agent == OracleAgent.name,
                                              lambda: self._run_once(task, OracleAgent(), image))
            if reasons:
                result.agent_info["audit"]["tests_reward"] = result.reward  # what the tests wrote, for the record
                result.outcome, result.reward, result.rewards = Outcome.TAMPERED, None, {}
                result.detail = (f"the tamper audit saw the tests run the agent's files ({len(reasons)}): "
                                 + "; ".join(reasons[:8]))

    def _verify_in_place(self, container: Container, task: Task, result: TrialResult) -> None:
        """Harbor's semantics: stale rewards removed, tests uploaded, test.sh run in the agent's container."""
        wipe = container.exec(f"rm -f -- {REWARD_TXT} {REWARD_JSON}; mkdir -p /logs/verifier && "
                              "chmod 777 /logs/verifier", 30, user="0")
        if wipe.exit_code != 0:
            result.outcome = Outcome.NO_REWARD_FILE
            result.detail = f"could not clear the reward files: {wipe.output.strip()[:500]}"
            return
        container.upload_dir(task.tests_dir, "/tests", executable=("test.sh",))
        self._run_tests(container, task, result, ["bash", "-c", "/tests/test.sh"], user=task.spec.verifier_user,
                        workdir=None, env=task.spec.verifier_env)

    def _run_tests(self, container: Container, task: Task, result: TrialResult, command: list[str], *,
                   user: str | None, workdir: str | None, env: dict[str, str]) -> None:
        timeout = limits.verifier_timeout(self.cfg, task)
        run = container.exec(command, timeout, env=env, user=user, workdir=workdir)
        result.timings["tests"] = run.seconds
        result.verifier_exit_code, result.verifier_output = run.exit_code, run.output
        if run.timed_out:
            result.outcome = Outcome.VERIFIER_TIMEOUT
            result.detail = f"verifier exceeded {timeout:.0f} s ([verifier] timeout_sec)"
            return
        over = self.sandbox.storage.exceeded(container)
        if over:
            result.outcome = Outcome.STORAGE_EXCEEDED
            result.detail = (f"the verifier's container wrote {over[0] >> 20} MiB, over the task's storage "
                             f"limit of {over[1] >> 20} MiB ([environment] storage_mb): killed")
            return
        if run.exit_code is None and run.output.startswith("exec failed"):
            result.outcome, result.detail = Outcome.NO_REWARD_FILE, f"tests/test.sh could not be started: {run.output}"
            return
        state, code, oom = container.status()
        if state != "running":
            result.outcome, result.detail = Outcome.CONTAINER_DIED, _died(state, code, oom, container)
            return
        try:
            rewards = read_rewards(container)
        except ValueError as exc:
            result.outcome, result.detail = Outcome.BAD_REWARD_FILE, str(exc)
            return
        if rewards is None:
            result.outcome = Outcome.NO_REWARD_FILE
            result.detail = (f"tests/test.sh (exit {run.exit_code}) wrote neither {REWARD_JSON} nor "
                             f"{REWARD_TXT}")
            return
        result.rewards, result.reward = rewards, rewards["reward"]


class _Background:
    """A container started in a thread (the pristine verifier boots while the agent works)."""

    def __init__(self, start):
        self._result: list = []
        self._thread = threading.Thread(target=self._run, args=(start,), daemon=True)
        self._thread.start()

    def _run(self, start) -> None:
        try:
            self._result.append(start())
        except BaseException as exc:  # noqa: BLE001 - re-raised by get()
            self._result.append(exc)

    def get(self) -> Container:
        self._thread.join()
        value = self._result[0]
        if isinstance(value, BaseException):
            raise value
        return value

    def discard(self, sandbox) -> None:
        """Remove the container if it was started but never handed out."""
        self._thread.join()
        value = self._result[0] if self._result else None
        if isinstance(value, Container):
            sandbox.discard(value)


def printable(value):
    """``value`` with every string made encodable as UTF-8: a file name that is not UTF-8 (read from a
    container as Python's surrogate escapes) shows its bytes as ``\\xff``, so a trial's result can be
    printed, logged and written as JSON whatever names the agent gave its files."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogateescape" if _escaped_only(value) else "backslashreplace") \
                .decode("utf-8", "backslashreplace")
        return value
    if isinstance(value, dict):
        return {printable(k): printable(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(printable(v) for v in value)
    return value


def _escaped_only(text: str) -> bool:
    """True when every lone surrogate in ``text`` is one of Python's escapes of a byte (U+DC80-U+DCFF)."""
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in text)


def _infra_outcome(exc: Exception) -> Outcome:
    return Outcome.SANDBOX_ERROR if isinstance(exc, SandboxError) else Outcome.INFRA_ERROR


def _died(state: str, code: int | None, oom: bool, container: Container) -> str:
    why = "killed for exceeding its memory limit" if oom else f"state {state}, exit code {code}"
    logs = container.logs().strip()
    return f"the container stopped ({why})" + (f"; last output: {logs[-300:]}" if logs else "")
