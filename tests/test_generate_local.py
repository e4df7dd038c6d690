"""mode=generate with the embedded model for each harness: whatever it manages, the run
finishes and reports what happened (its valid-env rate may well be 0)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.mark.parametrize("harness", ["prompt", "prompt_feedback", "terminal"])
def test_generate_with_the_embedded_model_reports_honestly(sandbox, tmp_path, harness):
    cmd = [sys.executable, "-m", "aes.run", "mode=generate", "proposer=local", "solver=local",
           f"harness={harness}", "assignments=1", "harness.max_revisions=0", "harness.max_turns=4",
           "harness.feedback_rounds=1", "harness.context_chars=6000", "calibration.initial_attempts=2",
           "agent.max_turns=2", f"hydra.run.dir={tmp_path}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = json.loads((tmp_path / "generate.json").read_text())
    [episode] = record["episodes"]
    assert episode["outcome"] in ("broken", "valid", "admitted")
    summary = record["summary"]
    assert summary["episodes"] == 1 and 0.0 <= summary["valid_env_rate"] <= 1.0
    if episode["outcome"] == "broken":
        assert episode["failed_stages"], "a broken episode must say where it failed"
    assert "Table 2 columns" in proc.stdout
    trajectory = json.loads(next((tmp_path / "proposer" / "proposer_trajectories").glob("*.json")).read_text())
    agent_steps = [s for s in trajectory["steps"] if s["source"] == "agent"]
    assert agent_steps and all(s["metrics"]["completion_token_ids"] for s in agent_steps)
