"""Table 2 as the paper counts it, assembled from a sweep: rates on the env each episode finally
submitted (valid = checks 1-4, admitted = 1-6, calibrated = in the band) with 95% intervals."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from aes.report.stats import wilson
from tests.conftest import REPO


def test_wilson_interval():
    low, high = wilson(8, 10)
    assert 0.49 < low < 0.5 and 0.94 < high < 0.95  # the textbook values for 8/10
    assert wilson(0, 0) == (None, None)
    assert wilson(0, 5)[0] == 0.0 and wilson(5, 5)[1] == 1.0


@pytest.mark.slow
def test_a_generate_sweep_assembles_its_table(tmp_path):
    sweep = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "aes.run", "-m", "mode=generate", "experiment=simulated", "assignments=3",
           "seed=0,1", f"hydra.sweep.dir={sweep}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Table 2 of this sweep" in proc.stdout + proc.stderr
    table = (sweep / "table2.md").read_text()
    assert "| scripted-proposer | scripted | 6 |" in table and "[" in table  # pooled over 2 jobs, with intervals
    episodes = [e for p in sweep.rglob("generate.json") for e in json.loads(p.read_text())["episodes"]]
    assert len(episodes) == 6 and all({"checks_1_4", "checks_1_6", "calibrated"} <= set(e) for e in episodes)
    again = subprocess.run([sys.executable, "-m", "aes.cli", "report", str(sweep)], capture_output=True, text=True,
                           cwd=REPO)
    assert again.returncode == 0 and "scripted-proposer" in again.stdout
    missing = subprocess.run([sys.executable, "-m", "aes.cli", "report", str(tmp_path / "nope")],
                             capture_output=True, text=True, cwd=REPO)
    assert missing.returncode == 2


def test_table8_counts_acceptance_and_rounds_per_domain_and_proposer(tmp_path):
    """Accepted = checks 1-6 on the env finally submitted; rounds = revisions + 1, accepted only."""
    from aes.report.table2 import table8

    def job(name, domain, proposer, episodes):
        (tmp_path / name).mkdir()
        (tmp_path / name / "generate.json").write_text(json.dumps({
            "domain": domain, "proposer": proposer,
            "episodes": [{"checks_1_6": ok, "revisions": revisions} for ok, revisions in episodes]}))

    job("0", "swe", "claude", [(True, 1), (True, 2), (False, 2)])
    job("1", "swe", "claude", [(True, 0), (False, 0)])  # a second job of the same arm is pooled
    job("2", "professional", "gpt", [(False, 2), (False, 2)])
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table8(tmp_path).splitlines()[2:]}
    assert rows["swe"].startswith("| swe | claude | 5 | 60.0% [") and rows["swe"].endswith("| 2.00 |")
    assert rows["professional"].startswith("| professional | gpt | 2 | 0.0% [") and rows["professional"].endswith("| n/a |")
    assert "no mode=generate job ran" in table8(tmp_path / "0" / "nothing")
