"""Harbor's own runner scores every seed task exactly as aes's validator does.

DESIGN.md requires each task to stay runnable by Harbor (``harbor run -p TASK -a oracle``)
with Harbor's semantics. This module installs Harbor (PyPI ``harbor``, in a side venv made
by ``launchers/install_harbor.sh``), runs its ``oracle`` and ``nop`` agents on every seed
task in one Harbor job (trials run concurrently), and checks that the rewards Harbor's
verifier records equal the ones aes's :class:`~aes.admission.Validator` computes.

Harbor runs on *copies* of the tasks, changed in two ways only, both because of what this
machine lacks, not because of what the tasks say:

* base images: the Dockerfiles say ``FROM python:3.12-slim``, which cannot be pulled here
  (no registry answers). aes builds such tasks from a local substitute
  (``sandbox.image_aliases``); the copies' ``FROM`` lines name that same image, chosen by
  aes's own ``ImageBuilder.resolve_base``, so both runners build on the same base.
* ``network_mode`` is set to ``public``. On Docker, Harbor enforces ``no-network`` with an
  egress-control sidecar and first probes the kernel with a pinned ``alpine`` image; with
  no registry that pull fails and Harbor refuses the task ("network_mode='no-network' is
  not supported by EnvironmentType.DOCKER environment"). The network plays no part in
  these rewards: nothing in this machine's containers can reach the internet anyway.

``harbor run`` exits 0 even when trials fail, so the rewards are read from each trial's
``result.json`` (``verifier_result.rewards``), and a trial with ``exception_info`` fails
its task's test with Harbor's message.

The tests skip only when the Docker engine cannot be reached (and fail even then when
``AES_REQUIRE_DOCKER=1``, as in CI); a failure to install or run Harbor fails them.

The second check covers tasks aes did not write: ``tests/fixtures/real_tasks`` holds tasks in
the style of public terminal-bench / Harbor tasks that bring their own test tooling (uv and
uvx, pytest plugins, a compiled checker, a non-root ``USER``, node's test runner, a verifier
that blocks until the work is done, ...), two of them deliberately invalid. Harbor's verdict on
each (oracle and nop rewards, and whether the task is admissible: oracle 1.0 and nop absent
or < 0.5) was recorded in ``verdicts.json`` by ``record_harbor_verdicts.py`` there; aes's
validator with the default config must reach the same verdict. That test runs aes only, not
Harbor; rerun the script when a task changes.

Settings: ``AES_HARBOR_HOME`` (side dir, default ``.aes-cache/harbor``),
``AES_HARBOR_CONCURRENCY`` (trials at once, default 8), ``AES_HARBOR_TIMEOUT``
(seconds for the whole Harbor job, default 1800).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from aes.admission import Validator
from aes.sandbox.harbor_copy import harbor_copy

pytestmark = pytest.mark.compat

REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO / "aes" / "domains" / "terminal" / "seeds"
INSTALLER = REPO / "launchers" / "install_harbor.sh"
SEED_NAMES = sorted(p.name for p in SEEDS.iterdir() if (p / "task.toml").is_file()) if SEEDS.is_dir() else []
REAL_TASKS = REPO / "tests" / "fixtures" / "real_tasks"
REAL_TASK_NAMES = sorted(p.name for p in REAL_TASKS.iterdir() if (p / "task.toml").is_file())
AGENTS = ("oracle", "nop")

# A FROM line: optional --platform style flags, the image, then e.g. "AS stage".


# -- task copies Harbor can run here ---------------------------------------------------------






@dataclass
class HarborTrial:
    """What one trial's result.json says."""

    task: str
    agent: str
    rewards: dict[str, float] | None
    exception: str | None
    path: Path


@dataclass
class HarborJob:
    """One `harbor run` over all task copies, started in the background."""

    proc: subprocess.Popen
    jobs_dir: Path
    log: Path
    timeout: float
    started: float = field(default_factory=time.monotonic)
    prepare_errors: dict[str, str] = field(default_factory=dict)
    _trials: list[HarborTrial] | None = None

    def trials(self) -> list[HarborTrial]:
        if self._trials is None:
            try:
                rc = self.proc.wait(timeout=max(1.0, self.timeout - (time.monotonic() - self.started)))
            except subprocess.TimeoutExpired:
                self.stop()
                pytest.fail(f"harbor run exceeded {self.timeout:.0f} s (AES_HARBOR_TIMEOUT); "
                            f"output:\n{self.output_tail()}", pytrace=False)
            if rc != 0:
                pytest.fail(f"harbor run exited {rc}; output:\n{self.output_tail()}", pytrace=False)
            self._trials = [_read_trial(p) for p in sorted(self.jobs_dir.glob("*/*/result.json"))]
        return self._trials

    def output_tail(self, chars: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # Harbor and its compose children
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def _read_trial(path: Path) -> HarborTrial:
    data = json.loads(path.read_text())
    config = data.get("config") or {}
    verifier = data.get("verifier_result") or {}
    exception = data.get("exception_info")
    return HarborTrial(
        task=Path((config.get("task") or {}).get("path") or data.get("task_name") or "").name,
        agent=(config.get("agent") or {}).get("name") or "",
        rewards=verifier.get("rewards"),
        exception=(f"{exception.get('exception_type')}: {exception.get('exception_message')}"
                   if exception else None),
        path=path.parent,
    )


# -- fixtures --------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def image_builder(cfg):
    """aes's image builder; skips when the Docker engine cannot be reached."""
    from aes.sandbox import SandboxUnavailable
    from aes.sandbox.images import ImageBuilder

    try:
        return ImageBuilder(cfg.sandbox)
    except SandboxUnavailable as exc:
        if os.environ.get("AES_REQUIRE_DOCKER") == "1":
            raise
        pytest.skip(f"Docker engine unreachable, Harbor compatibility not checked: {exc}")


# -- Harbor ----------------------------------------------------------------------------------
def harbor_env() -> dict[str, str]:
    """Install (or reuse) Harbor and return the environment to run it with."""
    proc = subprocess.run(["bash", str(INSTALLER)], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        pytest.fail(f"{INSTALLER.relative_to(REPO)} failed (exit {proc.returncode}):\n"
                    f"{proc.stderr[-4000:]}", pytrace=False)
    dumped = subprocess.run(
        ["bash", "-c", 'set -a; eval "$1"; env -0', "_", proc.stdout],
        capture_output=True, text=True, check=True,
    ).stdout
    env = dict(item.split("=", 1) for item in dumped.split("\0") if "=" in item)
    for key in ("HARBOR_BIN", "DOCKER_CONFIG", "LITELLM_LOCAL_MODEL_COST_MAP"):
        assert key in env, f"the installer did not export {key}: {proc.stdout!r}"
    return env


@pytest.fixture(scope="session")
def harbor_job(image_builder, tmp_path_factory):
    """Harbor's oracle and nop on a copy of every seed task, all in one job."""
    env = harbor_env()
    root = tmp_path_factory.mktemp("harbor")
    copies = root / "tasks"
    copies.mkdir()
    errors: dict[str, str] = {}
    for name in SEED_NAMES:
        try:
            harbor_copy(SEEDS / name, copies / name, image_builder)
        except (RuntimeError, OSError, ValueError) as exc:  # that task's test reports it
            shutil.rmtree(copies / name, ignore_errors=True)
            errors[name] = str(exc)
    n_trials = len(AGENTS) * (len(SEED_NAMES) - len(errors))
    if n_trials == 0:
        pytest.fail(f"no task copy could be prepared for Harbor: {errors}", pytrace=False)
    config = root / "job.json"
    config.write_text(json.dumps({"agents": [{"name": agent} for agent in AGENTS]}))
    concurrency = int(os.environ.get("AES_HARBOR_CONCURRENCY", "8"))
    log = root / "harbor.log"
    command = [env["HARBOR_BIN"], "run", "-c", str(config), "-p", str(copies),
               "-n", str(max(1, min(concurrency, n_trials))), "-o", str(root / "jobs"),
               "--job-name", "compat", "-y", "-q"]
    with open(log, "w") as out:
        proc = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    job = HarborJob(proc=proc, jobs_dir=root / "jobs", log=log,
                    timeout=float(os.environ.get("AES_HARBOR_TIMEOUT", "1800")), prepare_errors=errors)
    yield job
    job.stop()


@pytest.fixture(scope="session")
def aes_reports(cfg, harbor_job):
    """aes's validation of every seed task, computed while Harbor's job runs."""
    validator = Validator(cfg.sandbox)
    with ThreadPoolExecutor(max_workers=cfg.sandbox.concurrency) as pool:
        futures = {name: pool.submit(validator.validate, SEEDS / name) for name in SEED_NAMES}
    return futures  # leaving the pool waited for all: no validation thread runs on into the tests


# -- the check -------------------------------------------------------------------------------
@pytest.mark.parametrize("task", SEED_NAMES)
def test_harbor_rewards_equal_aes_rewards(task, harbor_job, aes_reports):
    report = aes_reports[task].result()
    if task in harbor_job.prepare_errors:
        pytest.fail(harbor_job.prepare_errors[task], pytrace=False)
    trials = {t.agent: t for t in harbor_job.trials() if t.task == task}

    problems = []
    for agent in AGENTS:
        aes_trial = getattr(report, agent)
        aes_rewards = aes_trial.rewards if aes_trial is not None and aes_trial.reward is not None else None
        if aes_rewards is None:
            why = f"{aes_trial.outcome.value}: {aes_trial.detail}" if aes_trial else "; ".join(map(str, report.reasons))
            problems.append(f"{agent}: aes computed no reward ({why})")
        harbor = trials.get(agent)
        if harbor is None:
            problems.append(f"{agent}: Harbor wrote no trial result; harbor output:\n{harbor_job.output_tail()}")
            continue
        if harbor.exception or harbor.rewards is None:
            problems.append(f"{agent}: Harbor's trial failed ({harbor.exception or 'no verifier_result'}; "
                            f"see {harbor.path})")
            continue
        harbor_rewards = {k: float(v) for k, v in harbor.rewards.items()}
        if aes_rewards is not None and harbor_rewards != aes_rewards:
            problems.append(f"{agent}: Harbor rewards {harbor_rewards} != aes rewards {aes_rewards} "
                            f"(Harbor trial: {harbor.path})")
    assert not problems, f"{task}:\n" + "\n".join(problems)


# -- externally styled tasks: aes's verdict == Harbor's recorded verdict --------------------
@pytest.fixture(scope="session")
def harbor_verdicts() -> dict[str, dict]:
    """Harbor's verdicts on tests/fixtures/real_tasks (record_harbor_verdicts.py wrote them)."""
    return json.loads((REAL_TASKS / "verdicts.json").read_text())


@pytest.fixture(scope="session")
def real_task_reports(cfg, image_builder):
    """aes's validation (default config, as `aes validate` runs it) of every real-style task."""
    validator = Validator(cfg.sandbox, nop_max_reward=cfg.admission.nop_max_reward)
    with ThreadPoolExecutor(max_workers=cfg.sandbox.concurrency) as pool:
        futures = {name: pool.submit(validator.validate, REAL_TASKS / name) for name in REAL_TASK_NAMES}
    return futures  # leaving the pool waited for all: no validation thread runs on into the tests


@pytest.mark.docker
@pytest.mark.parametrize("task", REAL_TASK_NAMES)
def test_aes_verdict_equals_harbor_verdict_on_real_style_tasks(task, harbor_verdicts, real_task_reports):
    assert task in harbor_verdicts, (f"no Harbor verdict recorded for {task}: run "
                                     f"tests/fixtures/real_tasks/record_harbor_verdicts.py {task}")
    harbor = harbor_verdicts[task]
    report = real_task_reports[task].result()
    seen = (f"aes: valid={report.valid} oracle={report.oracle_reward} nop={report.nop_reward} "
            f"reasons={[str(r) for r in report.reasons]}; Harbor: {harbor}")
    assert report.valid == harbor["valid"], seen
    if harbor["valid"]:
        assert report.oracle_reward == harbor["oracle_reward"], seen
    elif harbor["oracle_reward"] != 1.0:  # invalid for the same cause: the reference's reward
        assert report.oracle_reward == harbor["oracle_reward"], seen
    else:  # ... or the do-nothing run's
        assert report.nop_reward == harbor["nop_reward"], seen
