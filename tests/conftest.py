"""Shared fixtures: the composed config, a Docker sandbox, and tiny task directories."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
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


def pytest_runtest_logreport(report):
    _FILE_SECONDS[report.nodeid.split("::")[0]] = _FILE_SECONDS.get(report.nodeid.split("::")[0], 0.0) + report.duration


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter):
    if len(_FILE_SECONDS) < 2:
        return
    total = sum(_FILE_SECONDS.values())
    terminalreporter.write_sep("=", f"time per test file (setup + call + teardown): {total / 60:.1f} min in all")
    for path, seconds in sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])[:30]:
        terminalreporter.write_line(f"{seconds:8.0f} s {seconds / total:5.0%}  {path}")
