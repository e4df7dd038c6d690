"""Trials with Harbor's semantics: an agent phase, then the verifier, in one container.

* oracle: upload ``solution/`` to ``/solution``, run ``solve.sh`` (agent timeout applies);
* nop: do nothing;
* an agent: anything implementing :class:`TrialAgent` (the terminal agent, later);
* verify: delete ``/logs/verifier/reward.{txt,json}``, upload ``tests/`` to ``/tests``,
  run ``tests/test.sh``, then read ``reward.json`` (flat dict of numbers, key ``reward``)
  or else ``reward.txt`` (one float). No reward file is an error, not a zero.

As in Harbor, the verifier still runs after the agent phase times out. With
``sandbox.trusted_verifier`` (the default) it runs with a toolchain the agent never
could write to, after the agent's processes are gone (see
:mod:`aes.sandbox.verifier_toolchain`); the rewards of honest work are the same.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Protocol

import docker.errors

from aes.config import SandboxConfig
from aes.sandbox.container import Container, ExecResult, tar_entries
from aes.sandbox.docker_backend import DockerSandbox, SandboxError
from aes.sandbox.engine import SHUTDOWN_GRACE_SEC
from aes.sandbox.verifier_toolchain import MOUNT, verify_command
from aes.tasks import Task

log = logging.getLogger(__name__)

LOG_DIRS = ("logs", "logs/agent", "logs/verifier", "logs/artifacts")
REWARD_TXT = "/logs/verifier/reward.txt"
REWARD_JSON = "/logs/verifier/reward.json"


class Outcome(str, Enum):
    """How a trial ended. Only ``ok`` and ``agent_timeout`` carry a reward."""

    OK = "ok"
    AGENT_TIMEOUT = "agent_timeout"
    BUILD_FAILED = "build_failed"
    VERIFIER_TIMEOUT = "verifier_timeout"
    NO_REWARD_FILE = "no_reward_file"
    BAD_REWARD_FILE = "bad_reward_file"
    CONTAINER_DIED = "container_died"
    SANDBOX_ERROR = "sandbox_error"


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
        container.upload_dir(task.solution_dir, "/solution")
        env = {"DEBIAN_FRONTEND": "noninteractive", **task.spec.solution_env}
        result = container.exec("chmod +x /solution/solve.sh && /solution/solve.sh", timeout, env=env,
                                user=task.spec.agent_user)
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

    def to_dict(self) -> dict:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        return data


def parse_reward_json(data: bytes) -> dict[str, float]:
    """reward.json: a flat object of finite numbers with a ``reward`` key."""
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"reward.json is not JSON: {exc}") from None
    if not isinstance(value, dict) or "reward" not in value:
        raise ValueError("reward.json must be an object with a 'reward' key")
    for key, number in value.items():
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number):
            raise ValueError(f"reward.json value {key!r} = {number!r} is not a finite number")
    return {str(k): float(v) for k, v in value.items()}


def parse_reward_txt(data: bytes) -> dict[str, float]:
    """reward.txt: one finite float."""
    try:
        value = float(data.decode("utf-8").strip())
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"reward.txt does not hold one number: {data[:80]!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"reward.txt holds a non-finite number {value}")
    return {"reward": value}


_MAYBE_ENGINE = (Outcome.CONTAINER_DIED, Outcome.SANDBOX_ERROR)
"""Outcomes that a stopping Docker engine causes (besides errors from the engine's API)."""


class TrialRunner:
    """Runs trials of tasks in the Docker sandbox."""

    def __init__(self, cfg: SandboxConfig, sandbox: DockerSandbox | None = None):
        self.cfg = cfg
        self.sandbox = sandbox or DockerSandbox(cfg)

    def run(self, task: Task, agent: TrialAgent, image: str | None = None) -> TrialResult:
        """Build (unless ``image`` is given), start, run the agent, verify, tear down.

        A trial that ends without a reward because the Docker engine went away (a restart
        stops every container) waits for the engine and runs again in a new container, up to
        ``sandbox.engine_retries`` times; a reward already earned is kept.
        """
        def suspect(result: TrialResult) -> float | None:
            if result.reward is not None:
                return None
            return SHUTDOWN_GRACE_SEC if result.outcome in _MAYBE_ENGINE else 0.0

        result, retries = self.sandbox.through_restarts(f"{task.name}: trial",
                                                        lambda: self._run_once(task, agent, image), suspect,
                                                        cfg=self.cfg)
        if retries:
            result.detail = (result.detail + f" (run {retries + 1} times: the Docker engine went away "
                             "during the earlier runs)").strip()
        return result

    def _run_once(self, task: Task, agent: TrialAgent, image: str | None) -> TrialResult:
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
        try:
            container = self.sandbox.start(image, task)
        except SandboxError as exc:
            result.outcome, result.detail = Outcome.SANDBOX_ERROR, str(exc)
            return result
        timings["start"] = time.monotonic() - clock
        try:
            self._run_in(container, task, agent, result, timings)
        except docker.errors.APIError as exc:
            state, code, oom = container.status()
            if state != "running":
                result.outcome = Outcome.CONTAINER_DIED
                result.detail = _died(state, code, oom, container)
            else:
                result.outcome, result.detail = Outcome.SANDBOX_ERROR, f"docker error: {exc}"
            result.reward = None
        finally:
            clock = time.monotonic()
            container.remove()
            timings["teardown"] = time.monotonic() - clock
            result.timings = timings
        return result

    def _run_in(self, container: Container, task: Task, agent: TrialAgent,
                result: TrialResult, timings: dict[str, float]) -> None:
        container.put_archive(tar_entries({d: None for d in LOG_DIRS}))
        clock = time.monotonic()
        timeout = task.spec.agent_timeout_sec or self.cfg.default_agent_timeout_sec
        run = agent.run(task, container, timeout)
        timings["agent"] = time.monotonic() - clock
        result.agent_exit_code, result.agent_output = run.exit_code, run.output
        result.agent_info = run.info
        if run.timed_out:
            result.outcome = Outcome.AGENT_TIMEOUT
            result.detail = f"agent phase exceeded {timeout:.0f} s ([agent] timeout_sec)"
        state, code, oom = container.status()
        if state != "running":
            result.outcome, result.detail = Outcome.CONTAINER_DIED, _died(state, code, oom, container)
            return
        clock = time.monotonic()
        self._verify(container, task, result)
        timings["verify"] = time.monotonic() - clock

    def _prepare_verifier(self, container: Container) -> ExecResult:
        """Remove stale rewards; with the trusted verifier first end every agent process and
        clear anything planted where the tests or the reward files go."""
        if not self.cfg.trusted_verifier:
            return container.exec(f"rm -f -- {REWARD_TXT} {REWARD_JSON}", 30, user="root")
        container.restart()
        tool = f"{MOUNT}/usr/bin"
        return container.exec([f"{tool}/rm", "-rf", "--", "/tests", "/logs/verifier"], 30, user="root") \
            .combine(container.exec([f"{tool}/mkdir", "-p", "/logs/verifier"], 30, user="root"))

    def _verify(self, container: Container, task: Task, result: TrialResult) -> None:
        timeout = task.spec.verifier_timeout_sec or self.cfg.default_verifier_timeout_sec
        wipe = self._prepare_verifier(container)
        if wipe.exit_code != 0:
            result.outcome = Outcome.SANDBOX_ERROR
            result.detail = f"could not clear the verifier's paths: {wipe.output.strip()[:500]}"
            return
        container.upload_dir(task.tests_dir, "/tests")
        if self.cfg.trusted_verifier:
            command: str | list[str] = verify_command("/tests/test.sh", task.spec.verifier_env)
        else:  # Harbor's semantics: the container's own tools, test.sh run by its shebang
            command = "chmod +x /tests/test.sh && /tests/test.sh"
        run = container.exec(command, timeout, env=task.spec.verifier_env, user=task.spec.verifier_user)
        result.verifier_exit_code, result.verifier_output = run.exit_code, run.output
        if run.timed_out:
            result.outcome = Outcome.VERIFIER_TIMEOUT
            result.detail = f"verifier exceeded {timeout:.0f} s ([verifier] timeout_sec)"
            return
        state, code, oom = container.status()
        if state != "running":
            result.outcome, result.detail = Outcome.CONTAINER_DIED, _died(state, code, oom, container)
            return
        try:
            raw = container.read_file(REWARD_JSON)
            rewards = parse_reward_json(raw) if raw is not None else None
            if rewards is None:
                raw = container.read_file(REWARD_TXT)
                rewards = parse_reward_txt(raw) if raw is not None else None
        except ValueError as exc:
            result.outcome, result.detail = Outcome.BAD_REWARD_FILE, str(exc)
            return
        if rewards is None:
            result.outcome = Outcome.NO_REWARD_FILE
            result.detail = (f"tests/test.sh (exit {run.exit_code}) wrote neither {REWARD_JSON} nor "
                             f"{REWARD_TXT}")
            return
        result.rewards, result.reward = rewards, rewards["reward"]


def _died(state: str, code: int | None, oom: bool, container: Container) -> str:
    why = "killed for exceeding its memory limit" if oom else f"state {state}, exit code {code}"
    logs = container.logs().strip()
    return f"the container stopped ({why})" + (f"; last output: {logs[-300:]}" if logs else "")
