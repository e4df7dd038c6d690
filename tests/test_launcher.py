"""Multirun through the submitit launcher (hydra/launcher=local): failed jobs fail the sweep."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import FIXTURES, REPO


def test_failed_job_fails_the_multirun(tmp_path):
    cmd = [sys.executable, "-m", "aes.run", "-m", "mode=train,rollout", "solver=tiny",
           f"hydra.sweep.dir={tmp_path}", "hydra.launcher.timeout_min=5"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode != 0
    assert "needs trajectories=DIR" in proc.stdout + proc.stderr
    assert (tmp_path / ".submitit").is_dir()  # the jobs really went through submitit


@pytest.mark.docker
def test_sweep_jobs_run_through_submitit(sandbox, tmp_path):
    tasks = ",".join(str(FIXTURES / name) for name in ("good", "legacy-toml"))
    cmd = [sys.executable, "-m", "aes.run", "-m", "mode=validate", f"tasks={tasks}",
           f"hydra.sweep.dir={tmp_path}", "hydra.launcher.timeout_min=10"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    verdicts = sorted(tmp_path.glob("*/validation.json"))
    assert len(verdicts) == 2 and all(json.loads(v.read_text())[0]["valid"] for v in verdicts)
