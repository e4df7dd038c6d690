"""Concurrent solver attempts: a fresh container per attempt, one trajectory file each.

Layout under the output dir::

    trajectories/<env_id>/<solver>/<attempt>.json   # ATIF trajectory + reward, verifier output
    trajectories/<env_id>/<solver>/<attempt>.logs/  # its /logs/agent and /logs/artifacts, when it left any
    trajectories/index.jsonl                        # one row per (env, solver)

An attempt whose file exists is not run again, so an interrupted rollout resumes.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from aes.agents import TerminalAgent, write_json_atomic
from aes.rewards import task_reward
from aes.config import AgentConfig
from aes.models import ChatModel
from aes.paths import RunPaths
from aes.report.progress import Progress as Eta
from aes.rollout.index import AttemptRecord, IndexRow, failure_signature, read_index, row_key, write_index
from aes.errors import InfrastructureError
from aes.sandbox import TrialResult, TrialRunner
from aes.sandbox.trial import AGENT_BROKE, INFRASTRUCTURE
from aes.tasks import Task

log = logging.getLogger(__name__)

VERIFIER_CHARS = 16000
UNVERIFIABLE = AGENT_BROKE
"""Outcomes after which the verifier could not confirm any work of the agent, which had the
container until then: the attempt scores 0. Otherwise an agent could escape a low reward by
breaking the verifier (a FIFO where the tests read, killing its container, writing past its
storage, ...). Engine losses never get here (the trial runs again)."""
DEFAULT_INFRA_LIMIT = 8


class InfrastructureFailures(InfrastructureError):
    """Too many attempts of one batch failed for reasons outside the task and the agent."""


def env_id_of(task: Task) -> str:
    """The pool's env id, or the task's name made path-safe for tasks outside a pool."""
    return task.env_id or task.slug


@dataclass
class EnvRollouts:
    """All attempts of one solver on one env."""

    task: Task
    env_id: str
    records: list[AttemptRecord] = field(default_factory=list)
    build_error: str | None = None

    def row(self, solver: str, batch: str = "", policy_version: int = 0, root: Path | None = None) -> IndexRow:
        return IndexRow.from_attempts(self.env_id, self.task.name, solver, self.records, batch, policy_version, root)

    @property
    def rewards(self) -> list[float]:
        return [r.reward for r in sorted(self.records, key=lambda r: r.attempt) if r.reward is not None]


class RolloutRunner:
    """Runs K attempts of a solver on each task with bounded concurrency."""

    def __init__(self, solver: ChatModel, agent_cfg: AgentConfig, trials: TrialRunner,
                 out_dir: Path, concurrency: int, solver_name: str | None = None,
                 infra_limit: int = DEFAULT_INFRA_LIMIT, batch: str = "", policy_version: int = 0):
        self.solver = solver
        self.agent_cfg = agent_cfg
        self.trials = trials
        self.root = RunPaths(Path(out_dir)).trajectories
        """``RUN_DIR/trajectories``: every attempt's file and the one index."""
        self.index = RunPaths(Path(out_dir)).index
        """``RUN_DIR/trajectories/index.jsonl``: one row per (env, solver, batch)."""
        self.concurrency = max(1, concurrency)
        self.solver_name = solver_name or solver.config.name
        self.infra_limit = infra_limit
        """Attempts of one batch that may fail for infrastructure reasons (``infra_failure_limit``)."""
        self.batch = batch
        """Name of the batch these attempts are recorded under (a directory below the solver's)."""
        self.policy_version = policy_version
        """DPPO updates applied to the solver; recorded with every row of the index."""
        self.infra_failures: Counter[str] = Counter()
        """Cause -> count of attempts lost to the infrastructure, over this runner's life."""
        self.tampered: Counter[str] = Counter()
        """env id -> attempts the tamper audit ended as tampered (scored 0), over this runner's life."""
        self.max_policy_span: int | None = None
        """Most policy updates one attempt may see (carried rollouts); None: no limit."""
        self.hil = None
        """How attempts meet human-in-the-loop tasks (:class:`aes.hil.tool.HilRun`: the setting, the
        judge, the shaped reward's weight); None: HiL off."""
        self._lock = threading.Lock()
        self._background: dict[str, ThreadPoolExecutor] = {}

    def at(self, batch: str, policy_version: int | None = None, solver_name: str | None = None) -> "RolloutRunner":
        """The same solver, sandbox and index, recording the batch ``batch`` (of ``policy_version``)."""
        view = RolloutRunner(self.solver, self.agent_cfg, self.trials, self.root.parent, self.concurrency,
                             solver_name or self.solver_name, self.infra_limit, batch,
                             self.policy_version if policy_version is None else policy_version)
        view._lock, view.infra_failures, view._background = self._lock, self.infra_failures, self._background
        view.tampered = self.tampered
        view.max_policy_span = self.max_policy_span
        view.hil = self.hil
        return view

    def submit(self, tasks: list[Task], attempts: int) -> "InFlight":
        """Start ``attempts`` attempts of every task in the background and return at once. The
        flywheel takes groups as they complete; attempts still running at an update go on under
        the new policy (carried rollouts). One pool of ``concurrency`` workers serves all batches."""
        envs = {env_id_of(t): EnvRollouts(task=t, env_id=env_id_of(t)) for t in tasks}
        images = self._build_all(envs)
        with self._lock:
            pool = self._background.get("pool")
            if pool is None:
                pool = self._background["pool"] = ThreadPoolExecutor(max_workers=self.concurrency,
                                                                      thread_name_prefix="aes-rollout")
        futures = {env_id: [pool.submit(self._attempt, env, k, images[env_id], None) for k in range(attempts)]
                   for env_id, env in envs.items() if env_id in images}
        return InFlight(self, {e: envs[e] for e in futures}, futures)

    def shutdown(self) -> None:
        """Stop the background pool (attempts in flight finish first)."""
        pool = self._background.pop("pool", None)
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def variant(self, solver_name: str) -> "RolloutRunner":
        """The same solver and sandbox, recorded under another name (e.g. diagnostic runs)."""
        return self.at(self.batch, solver_name=solver_name)

    def path(self, env_id: str, attempt: int) -> Path:
        base = self.root / env_id / self.solver_name
        return (base / self.batch if self.batch else base) / f"{attempt}.json"

    def run(self, tasks: list[Task], attempts: int, hints: dict[str, str] | None = None,
            show_progress: bool = True, label: str = "rollouts") -> dict[str, EnvRollouts]:
        """Attempts ``0..attempts-1`` of every task (existing ones are reused).

        Progress: a rich bar with ``show_progress``; without it (the flywheel's calibration, parent
        rollouts and evaluation) one log line per finished attempt, under ``label``. Either way one
        line when the batch starts and one when it ends."""
        envs = {env_id_of(t): EnvRollouts(task=t, env_id=env_id_of(t)) for t in tasks}
        images = self._build_all(envs)
        jobs = [(env, k) for env in envs.values() if env.env_id in images for k in range(attempts)]
        what = f"{label} [{self.solver_name}{', ' + self.batch if self.batch else ''}]"
        log.info("%s: %d attempt(s) on %d env(s) starting", what, len(jobs), len(images))
        started = time.monotonic()
        eta = Eta(len(jobs))
        counts = {"done": 0, "running": 0, "failed": 0}
        batch: Counter[str] = Counter()
        columns = (TextColumn(f"rollouts [{self.solver_name}]"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("running {task.fields[running]}  failed {task.fields[failed]}"),
                   TimeElapsedColumn(), TimeRemainingColumn())
        with Progress(*columns, disable=not show_progress) as progress:
            bar = progress.add_task("rollouts", total=len(jobs), running=0, failed=0)

            def attempt(env: EnvRollouts, k: int) -> None:
                with self._lock:
                    counts["running"] += 1
                    progress.update(bar, running=counts["running"])
                began = time.monotonic()
                try:
                    record = self._attempt(env, k, images[env.env_id], (hints or {}).get(env.env_id))
                finally:
                    with self._lock:
                        counts["running"] -= 1
                with self._lock:
                    if record.outcome in _INFRA_VALUES:
                        batch[record.failure or record.outcome] += 1
                        self.infra_failures[record.failure or record.outcome] += 1
                    else:
                        env.records.append(record)
                    if record.outcome == "tampered":
                        self.tampered[env.env_id] += 1
                        log.warning("%s attempt %d tampered with its verification (scored 0): %s", env.env_id, k,
                                    record.path)
                    counts["failed"] += record.reward is None
                    counts["done"] += 1
                    done = eta.step()
                    progress.update(bar, advance=1, running=counts["running"], failed=counts["failed"])
                    if not show_progress:
                        reward = "no reward" if record.reward is None else f"reward {record.reward:.2f}"
                        log.info("%s: %s attempt %d/%d: %s (%s, %.1f s); %s", what, env.env_id, k + 1,
                                 attempts, reward, record.end_reason or record.outcome, time.monotonic() - began, done)
                if sum(batch.values()) > self.infra_limit:
                    raise InfrastructureFailures(_infra_message(batch, self.infra_limit))

            with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
                for future in [pool.submit(attempt, env, k) for env, k in jobs]:
                    future.result()
        self.write_index(envs.values())
        rewards = [r for env in envs.values() for r in env.rewards]
        log.info("%s: %d attempt(s) done in %.1f s, mean reward %s, %d without a reward", what, counts["done"],
                 time.monotonic() - started, f"{sum(rewards) / len(rewards):.3f}" if rewards else "n/a",
                 counts["failed"])
        return envs

    def _build_all(self, envs: dict[str, EnvRollouts]) -> dict[str, str]:
        """The image of every env whose attempts can run; the others get their ``build_error``
        (the image did not build, or a human-in-the-loop task's registry does not load)."""
        images: dict[str, str] = {}
        runnable = {}
        for env_id, env in envs.items():
            error = self.hil.error(env.task) if self.hil else None
            if error:
                env.build_error = f"the blocker registry is invalid, no attempts: {error}"
                log.error("%s: %s", env_id, env.build_error)
            else:
                runnable[env_id] = env
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            builds = {env_id: pool.submit(self.trials.sandbox.build, env.task) for env_id, env in runnable.items()}
            for env_id, future in builds.items():
                build = future.result()
                if build.image:
                    images[env_id] = build.image
                else:
                    envs[env_id].build_error = str(build.reason)
                    log.error("%s: image build failed, no attempts: %s", env_id, build.reason)
        return images

    def _attempt(self, env: EnvRollouts, k: int, image: str, hints: str | None) -> AttemptRecord:
        path = self.path(env.env_id, k)
        if path.exists():
            try:
                return record_from_file(path)
            except (ValueError, KeyError) as exc:
                log.warning("unreadable trajectory %s (%s); running the attempt again", path, exc)
        hil = self.hil.attempt(env.task) if self.hil else None
        agent = TerminalAgent(self.solver, self.agent_cfg, name=self.solver_name, hints=hints,
                              max_policy_span=self.max_policy_span, hil=hil)
        result = self.trials.run(env.task, agent, image, logs_to=path.parent / f"{path.stem}.logs")
        trajectory = attach_result(result, env.env_id, self.solver_name, k)
        if result.logs.get("dir"):  # screenshots and logs the attempt left in /logs/agent, /logs/artifacts
            trajectory["extra"]["logs"] = {**result.logs, "dir": Path(result.logs["dir"]).name}
        elif result.logs.get("note"):
            trajectory["extra"]["logs"] = {"note": result.logs["note"]}
        _shape(trajectory["extra"], self.hil.shaped_reward_weight if self.hil else 0.0)
        if result.outcome in INFRASTRUCTURE:
            # kept for the record, under a name a resumed run does not reuse: the attempt runs again
            aside = path.parent / "infra" / path.name
            trajectory["extra"]["failure"] = f"{result.outcome.value}: {result.detail.splitlines()[0][:160] if result.detail else ''}"
            write_json_atomic(aside, trajectory)
            log.error("%s attempt %d lost to the infrastructure (%s): %s", env.env_id, k, result.outcome.value,
                      result.detail[:300])
            return record_from_trajectory(trajectory, aside)
        write_json_atomic(path, trajectory)
        return record_from_trajectory(trajectory, path)

    def write_index(self, envs) -> None:
        """Merge these envs' rows into ``index.jsonl`` (rows of other envs and batches are kept)."""
        with self._lock:
            rows = {row_key(r): r for r in read_index(self.index)}
            for env in envs:
                if env.records:
                    row = env.row(self.solver_name, self.batch, self.policy_version, self.root).to_dict()
                    rows[row_key(row)] = row
            fields = set(IndexRow.__dataclass_fields__)
            write_index(self.index, [IndexRow(**{k: v for k, v in r.items() if k in fields}) for r in rows.values()])


def _shape(extra: dict, weight: float) -> None:
    """Human-in-the-loop shaped reward, ``extra.reward_shaped``: the task reward plus ``weight`` x
    Ask-F1. Only the DPPO advantage uses it (:func:`aes.agents.trajectory.training_reward`);
    ``extra.reward`` stays the task reward."""
    hil = extra.get("hil")
    if not weight or not hil or extra.get("reward") is None:
        return
    extra["reward_shaped"] = extra["reward"] + weight * hil["ask_f1"]


class InFlight:
    """Attempts started by :meth:`RolloutRunner.submit`, taken env by env as they complete."""

    def __init__(self, runner: RolloutRunner, envs: dict[str, EnvRollouts], futures: dict[str, list]):
        self.runner, self.envs, self.futures = runner, envs, futures

    def ready(self) -> list[str]:
        """Envs whose attempts have all finished."""
        return [env_id for env_id, fs in self.futures.items() if all(f.done() for f in fs)]

    def running(self) -> int:
        """Attempts not finished yet."""
        return sum(not f.done() for fs in self.futures.values() for f in fs)

    def wait(self, timeout: float | None = None) -> None:
        """Until at least one more attempt finishes (or ``timeout``)."""
        from concurrent.futures import FIRST_COMPLETED, wait

        pending = [f for fs in self.futures.values() for f in fs if not f.done()]
        if pending:
            wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)

    def take(self, env_ids: list[str]) -> dict[str, EnvRollouts]:
        """The finished envs' attempts (recorded in the index), no longer in flight."""
        out, lost = {}, Counter()
        for env_id in env_ids:
            env = self.envs.pop(env_id)
            for future in self.futures.pop(env_id):
                record = future.result()
                if record.outcome in _INFRA_VALUES:
                    lost[record.failure or record.outcome] += 1
                else:
                    env.records.append(record)
            out[env_id] = env
        with self.runner._lock:
            self.runner.infra_failures.update(lost)
        if sum(lost.values()) > self.runner.infra_limit:
            raise InfrastructureFailures(_infra_message(lost, self.runner.infra_limit))
        self.runner.write_index(out.values())
        return out


_INFRA_VALUES = frozenset(o.value for o in INFRASTRUCTURE)


def _infra_message(causes: Counter, limit: int) -> str:
    listed = "; ".join(f"{n} x {cause}" for cause, n in causes.most_common(5))
    return (f"{sum(causes.values())} solver attempts failed for reasons outside the task and the agent "
            f"(more than infra_failure_limit={limit}): {listed}. These attempts were not scored. Fix the cause "
            "(start the model server, check the Docker engine) and rerun the same command: finished attempts "
            "are kept.")


def attach_result(result: TrialResult, env_id: str, solver: str, attempt: int) -> dict:
    """The trajectory of a trial with the trial's reward and verifier output in ``extra``."""
    trajectory = result.agent_info.get("trajectory") or {"schema_version": "ATIF-v1.8", "steps": [],
                                                         "agent": {"name": result.agent}, "extra": {}}
    end_reason = result.agent_info.get("end_reason")
    reward = 0.0 if result.reward is None and result.outcome in UNVERIFIABLE else result.reward
    trajectory.setdefault("extra", {}).update({
        "env_id": env_id, "task": result.task, "solver": solver, "attempt": attempt,
        "reward": reward, "rewards": result.rewards, "outcome": result.outcome.value,
        "detail": result.detail, "end_reason": end_reason,
        "verifier_stdout": result.verifier_output[-VERIFIER_CHARS:],
        "failure": failure_signature(reward, result.outcome.value, end_reason, result.verifier_output),
        "timings": {k: round(v, 4) for k, v in result.timings.items()},
    })
    return trajectory


def record_from_trajectory(trajectory: dict, path: Path) -> AttemptRecord:
    extra = trajectory["extra"]
    return AttemptRecord(env_id=extra["env_id"], solver=extra["solver"], attempt=extra["attempt"],
                         reward=task_reward(extra), outcome=extra["outcome"], end_reason=extra.get("end_reason"),
                         failure=extra.get("failure"), path=str(path))


def record_from_file(path: Path) -> AttemptRecord:
    return record_from_trajectory(json.loads(path.read_text()), path)

