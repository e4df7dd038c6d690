"""Multirun through the submitit launcher (hydra/launcher=local): failed jobs fail the sweep."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_failed_job_fails_the_multirun(tmp_path):
    cmd = [sys.executable, "-m", "aes.run", "-m", "mode=train,generate", "solver.backend=nonexistent",
           f"hydra.sweep.dir={tmp_path}", "hydra.launcher.timeout_min=5"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode != 0
    assert "is not available yet" in proc.stdout + proc.stderr
    assert (tmp_path / ".submitit").is_dir()  # the jobs really went through submitit
