"""Shared fixtures: the composed config, a Docker sandbox, and tiny task directories."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from aes.config import compose_config

REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO / "aes" / "domains" / "terminal" / "seeds"
FIXTURES = REPO / "tests" / "fixtures" / "tasks"

# The command lines of the container's processes, one a line, read from /proc: the upstream
# python:*-slim images have no procps (no `ps`), and tests must not depend on what the local
# stand-in image happens to contain.
PROC_ARGS = "{ for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < \"$f\"; echo; done; } 2>/dev/null"

REWARD_TEST = """#!/bin/bash
if [ -f /app/answer.txt ] && [ "$(cat /app/answer.txt)" = "42" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


@pytest.fixture(scope="session")
def cfg():
    return compose_config([])


@pytest.fixture(scope="session")
def sandbox(cfg):
    """A Docker sandbox; skips without an engine unless AES_REQUIRE_DOCKER=1 (CI)."""
    from aes.sandbox import DockerSandbox, SandboxUnavailable
    from aes.sandbox.bootstrap import image_exists

    try:
        box = DockerSandbox(cfg.sandbox)
    except SandboxUnavailable as exc:
        if os.environ.get("AES_REQUIRE_DOCKER") == "1":
            raise
        pytest.skip(f"no Docker engine: {exc}")
    if not image_exists(cfg.sandbox):
        pytest.fail(f"base image {cfg.sandbox.base_image} missing: run `aes sandbox bootstrap`")
    return box


def make_task(root: Path, name: str = "t", *, dockerfile: str | None = None,
              solve: str = "echo 42 > /app/answer.txt\n", test: str = REWARD_TEST,
              toml: str = "", instruction: str = "Write 42 to /app/answer.txt.\n",
              files: dict[str, str] | None = None) -> Path:
    """Write a small Harbor task; every part can be replaced."""
    path = root / name
    (path / "environment").mkdir(parents=True)
    (path / "solution").mkdir()
    (path / "tests").mkdir()
    (path / "instruction.md").write_text(instruction)
    (path / "task.toml").write_text(textwrap.dedent(toml) or (
        f'[task]\nname = "test/{name}"\n\n[agent]\ntimeout_sec = 60\n\n'
        '[verifier]\ntimeout_sec = 60\n\n[environment]\nnetwork_mode = "no-network"\n'
    ))
    (path / "environment" / "Dockerfile").write_text(
        dockerfile if dockerfile is not None else "FROM python:3.12-slim\nWORKDIR /app\n")
    (path / "solution" / "solve.sh").write_text("#!/bin/bash\n" + solve)
    (path / "tests" / "test.sh").write_text(test)
    for rel, text in (files or {}).items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    return path


@pytest.fixture(scope="session")
def simulated_run(tmp_path_factory) -> Path:
    """``python -m aes.run experiment=simulated flywheel.rounds=2 logger=wandb`` (offline): a real run
    dir with metrics of every event, a pool, trajectories, report.html and a wandb run (~15 s)."""
    run = tmp_path_factory.mktemp("simulated") / "run"
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DISABLE_GIT": "true"}
    env.pop("WANDB_API_KEY", None)
    proc = subprocess.run([sys.executable, "-m", "aes.run", "experiment=simulated", "flywheel.rounds=2", "logger=wandb",
                           "logger.tags=[test]", f"hydra.run.dir={run}"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return run


# -- where the suite's time goes (CI prints it last, where its log's tail shows it) --------------

_FILE_SECONDS: dict[str, float] = {}
_FILE_CPU: dict[str, float] = {}
"""Machine-wide busy CPU-seconds (/proc/stat, containers included) while each file's tests ran: with
one process, a file whose CPU-seconds are far under its seconds x cores waits (on time, a server, a
timeout) rather than computes."""


def _busy_cpu_seconds() -> float | None:
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


_CPU_AT_START: list[float | None] = [None]


def pytest_runtest_logstart(nodeid, location):
    _CPU_AT_START[0] = _busy_cpu_seconds()


def pytest_runtest_logfinish(nodeid, location):
    before, after = _CPU_AT_START[0], _busy_cpu_seconds()
    if before is not None and after is not None:
        path = nodeid.split("::")[0]
        _FILE_CPU[path] = _FILE_CPU.get(path, 0.0) + after - before


_SPANS: dict[tuple[str, str], list[float]] = {}
"""(worker, file) -> [first start, last stop] (epoch seconds): each worker's timeline, for the summary."""
_ENGINE_WAITS: dict[str, float] = {}
"""worker -> seconds its tests waited on the engine lock (the drill waiting for the other worker's
module to end, or a module waiting for the drill)."""


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration
    props = dict(report.user_properties)
    worker = props.get("worker", getattr(report, "worker_id", None) or "main")
    span = _SPANS.setdefault((worker, path), [report.start, report.stop])
    span[0], span[1] = min(span[0], report.start), max(span[1], report.stop)
    if report.when == "setup" and props.get("engine_wait"):
        _ENGINE_WAITS[worker] = _ENGINE_WAITS.get(worker, 0.0) + props["engine_wait"]


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter):
    if len(_FILE_SECONDS) < 2:
        return
    total = sum(_FILE_SECONDS.values())
    cores = os.cpu_count() or 1
    terminalreporter.write_sep("=", f"time per test file (setup + call + teardown, summed over workers): {total / 60:.1f} min")
    if terminalreporter.config.getoption("numprocesses", None):
        _FILE_CPU.clear()  # with workers the files overlap, and the hooks run in the controller: no figure
    if _FILE_CPU:
        terminalreporter.write_line(f"(cpu: machine-wide busy CPU-seconds while the file ran; busy: of {cores} cores)")
    for path, seconds in sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])[:40]:
        cpu = _FILE_CPU.get(path)
        load = f"  cpu {cpu:6.0f} s busy {cpu / (seconds * cores):4.0%}" if cpu is not None and seconds > 0 else ""
        terminalreporter.write_line(f"{seconds:8.0f} s {seconds / total:5.0%}{load}  {path}")
    _worker_timelines(terminalreporter)


def _worker_timelines(terminalreporter) -> None:
    """With workers: when each one ran which file, what it waited for on the engine lock, and how long
    it stood idle at the end (the imbalance the grouping did not remove)."""
    workers = sorted({worker for worker, _ in _SPANS})
    if len(workers) < 2:
        return
    start = min(span[0] for span in _SPANS.values())
    end = max(span[1] for span in _SPANS.values())
    terminalreporter.write_sep("=", f"workers' timelines ({(end - start) / 60:.1f} min of tests)")
    for worker in workers:
        spans = sorted((span, path) for (w, path), span in _SPANS.items() if w == worker)
        last = max(span[1] for span, _ in spans)
        terminalreporter.write_line(
            f"{worker}: {len(spans)} files, waited {_ENGINE_WAITS.get(worker, 0.0):.0f} s on the engine lock, "
            f"idle {end - last:.0f} s at the end; its longest files:")
        for (t0, t1), path in sorted(spans, key=lambda sp: sp[0][0] - sp[0][1])[:8]:
            terminalreporter.write_line(f"    {t0 - start:7.0f} s  +{t1 - t0:5.0f} s  {path}")


# -- two workers (pytest-xdist; the README's test command: -n 2) ------------------------------
# A test module runs whole on one worker (its module fixtures are made once). Modules that share
# something machine-wide run on the same worker, one after another; the longest start first, so
# that the two workers end together. `-n 0` runs everything in this one process, as before.

TOGETHER = {
    # one Harbor install (launchers/install_harbor.sh), each job at concurrency 8
    "harbor": ("test_harbor_compat.py", "test_domain_compat.py", "test_hil_compat.py"),
    # the session's simulated run (conftest.simulated_run) made once
    "simulated": ("test_report.py", "test_run_dir_size.py", "test_wandb_logger.py"),
}
FIRST = ("test_resume_embedded.py", "harbor", "test_vllm.py", "test_cluster_vllm_job.py", "test_domain_browser.py",
         "test_domain_desktop.py", "test_flywheel.py", "test_ray_executor.py", "test_cluster_job.py",
         "test_domain_tool_calling_wrong_work.py", "test_domain_kit.py", "test_security.py", "test_seal.py",
         "test_hostile_proposals.py", "test_generate_local.py", "test_run_lifecycle.py", "test_proposer.py")
"""Groups by their measured length in CI, longest first (the rest follow in file order)."""


def _group(path: str) -> str:
    name = Path(path.split("::", 1)[0]).name
    return next((group for group, names in TOGETHER.items() if name in names), name)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return  # one process: file order
    rank = {group: i for i, group in enumerate(FIRST)}
    order = {id(item): i for i, item in enumerate(items)}

    def key(item):
        group = _group(item.nodeid)
        return (rank[group], 0, order[id(item)]) if group in rank else (len(FIRST), order[id(item)], 0)

    items.sort(key=key)  # the workers' collection order is the order the groups are handed out


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Whole groups to a worker, in collection order (xdist's own ``loadgroup`` marks do not reach
    the node ids under pytest 9, so the grouping is done here, by file name)."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid)

    return ModuleGroups(config, log)


# The engine-restart drill (tests/test_faults.py) restarts this host's dockerd: under two workers
# it waits until the other worker is between modules and holds it there until the engine is back.
# Every other module holds the engine shared for as long as it runs (its module fixtures included).

ENGINE_LOCK = REPO / ".aes-cache" / "pytest-engine.lock"


class _EngineShare:
    def __init__(self):
        import fcntl

        self.fcntl = fcntl
        ENGINE_LOCK.parent.mkdir(parents=True, exist_ok=True)
        self.gate = open(ENGINE_LOCK.with_suffix(".gate"), "a+")  # queues the shared holders behind the drill
        self.lock = open(ENGINE_LOCK, "a+")
        self.held: str | None = None

    def hold(self, mode: str) -> None:
        if self.held == mode:
            return
        self.release()
        if mode == "exclusive":
            self.fcntl.flock(self.gate, self.fcntl.LOCK_EX)
            self.fcntl.flock(self.lock, self.fcntl.LOCK_EX)
        else:
            self.fcntl.flock(self.gate, self.fcntl.LOCK_EX)
            self.fcntl.flock(self.gate, self.fcntl.LOCK_UN)
            self.fcntl.flock(self.lock, self.fcntl.LOCK_SH)
        self.held = mode

    def release(self) -> None:
        if self.held:
            self.fcntl.flock(self.lock, self.fcntl.LOCK_UN)
            self.fcntl.flock(self.gate, self.fcntl.LOCK_UN)
            self.held = None


_ENGINE: list[_EngineShare] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    if not _ENGINE:
        _ENGINE.append(_EngineShare())
    engine = _ENGINE[0]
    waited = time.monotonic()
    engine.hold("exclusive" if item.get_closest_marker("engine_restart") else "shared")
    item.user_properties.append(("worker", os.environ["PYTEST_XDIST_WORKER"]))
    if time.monotonic() - waited > 1:
        item.user_properties.append(("engine_wait", round(time.monotonic() - waited, 1)))
    yield
    if nextitem is None or nextitem.path != item.path or item.get_closest_marker("engine_restart"):
        engine.release()  # between modules (and after the drill) the other worker may take it

