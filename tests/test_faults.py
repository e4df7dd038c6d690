"""Faults of the machine, not of the task: the Docker engine restarting mid-run, a full disk.

The engine-restart test stops and starts this host's ``dockerd``; it runs only where
``AES_ALLOW_ENGINE_RESTART=1`` (CI sets it), never against a developer's own engine by surprise.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import sqlite3
import subprocess
import sys

import pytest

from aes.sandbox import OracleAgent, TrialRunner
from aes.sandbox.docker_client import LABEL_MANAGED, LABEL_PID
from aes.sandbox.engine import DiskFull, is_disk_full
from aes.sandbox.faults import restart_drill
from aes.tasks import load_task
from tests.conftest import REPO, make_task


def test_disk_full_is_recognised_through_wrappers():
    enospc = OSError(errno.ENOSPC, "No space left on device")
    try:
        try:
            raise enospc
        except OSError as exc:
            raise RuntimeError("writing the trajectory failed") from exc
    except RuntimeError as wrapped:
        assert is_disk_full(wrapped)
    assert is_disk_full(sqlite3.OperationalError("database or disk is full"))
    assert is_disk_full(RuntimeError("docker build failed: write /var/lib/docker/x: no space left on device"))
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not is_disk_full(ValueError("reward.txt does not hold one number"))


def test_a_full_run_dir_stops_the_run_with_a_message(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").symlink_to("/dev/full")  # every write there fails with ENOSPC
    proc = subprocess.run(
        [sys.executable, "-m", "aes.run", "mode=validate", f"run_dir={run_dir}", f"hydra.run.dir={tmp_path / 'h'}"],
        capture_output=True, text=True, cwd=REPO, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-2000:]
    assert "the disk is full" in out and "run the same command again" in out
    assert "Traceback" not in out


@pytest.mark.docker
def test_low_docker_disk_stops_trials_before_they_fail(sandbox, cfg, tmp_path):
    if sandbox.engine._root is None:
        pytest.skip("the Docker engine is not on this host; its disk cannot be measured")
    greedy = dataclasses.replace(cfg.sandbox, min_free_disk_gib=1e9)  # more than any disk has
    task = load_task(make_task(tmp_path))
    with pytest.raises(DiskFull, match="GiB free, less than sandbox.min_free_disk_gib"):
        TrialRunner(greedy, sandbox).run(task, OracleAgent())
    assert TrialRunner(cfg.sandbox, sandbox).run(task, OracleAgent()).reward == 1.0


@pytest.mark.docker
@pytest.mark.security
@pytest.mark.engine_restart
def test_trials_in_flight_survive_a_restart_of_the_docker_engine(sandbox, cfg, tmp_path):
    if os.environ.get("AES_ALLOW_ENGINE_RESTART") != "1":
        pytest.skip("restarts the Docker engine; set AES_ALLOW_ENGINE_RESTART=1 (CI does)")
    generation = sandbox.engine.generation
    results = restart_drill(TrialRunner(cfg.sandbox, sandbox), tmp_path)
    assert sandbox.engine.generation > generation
    assert [r.reward for r in results] == [1.0] * len(results), [(r.outcome, r.detail) for r in results]
    assert all("engine went away" in r.detail for r in results)  # each was cut off and run again
    mine = {"label": [f"{LABEL_MANAGED}=true", f"{LABEL_PID}={os.getpid()}"]}
    sandbox.drain()  # containers are removed in the background
    assert sandbox.client.api.containers(all=True, filters=mine) == []


def test_no_engine_stops_the_run_with_what_to_do(tmp_path):
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-such-engine.sock"}
    proc = subprocess.run([sys.executable, "-m", "aes.run", "mode=validate", f"hydra.run.dir={tmp_path / 'h'}"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-2000:]
    assert "cannot reach the Docker engine" in out and "Traceback" not in out
