"""mode=generate with the embedded model for each harness: whatever it manages, the run
finishes and reports what happened (its valid-env rate may well be 0)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow]


HARNESSES = ("prompt", "prompt_feedback", "terminal")


@pytest.fixture(scope="module")
def generate_runs(sandbox, tmp_path_factory):
    """One ``mode=generate`` run per harness, started together (each run's model serves one thread, so
    two cores run them side by side): harness -> (completed process, run dir)."""
    started = {}
    for harness in HARNESSES:
        run_dir = tmp_path_factory.mktemp(f"generate-{harness}")
        cmd = [sys.executable, "-m", "aes.run", "mode=generate", "proposer=local", "solver=local",
               f"harness={harness}", "assignments=1", "harness.max_revisions=0", "harness.max_turns=4",
               "harness.feedback_rounds=1", "harness.context_chars=6000", "calibration.initial_attempts=2",
               "agent.max_turns=2", f"hydra.run.dir={run_dir}"]
        with open(run_dir / "stdout.log", "w") as out, open(run_dir / "stderr.log", "w") as err:
            started[harness] = (subprocess.Popen(cmd, stdout=out, stderr=err, text=True, cwd=REPO), run_dir)
    runs = {}
    try:
        for harness, (proc, run_dir) in started.items():
            proc.wait(timeout=1800)
            runs[harness] = (subprocess.CompletedProcess(proc.args, proc.returncode, (run_dir / "stdout.log").read_text(),
                                                         (run_dir / "stderr.log").read_text()), run_dir)
    finally:
        for proc, _ in started.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return runs


@pytest.mark.parametrize("harness", HARNESSES)
def test_generate_with_the_embedded_model_reports_honestly(generate_runs, harness):
    proc, tmp_path = generate_runs[harness]
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
