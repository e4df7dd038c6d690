"""Table 2 as the paper counts it, assembled from a sweep: rates on the env each episode finally
submitted (valid = checks 1-4, accepted = 1-6, calibrated = in the band) with 95% intervals."""

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
    assert "| scripted-proposer | scripted | terminal | scripted | 6 |" in table and "[" in table  # 2 jobs pooled
    episodes = [e for p in sweep.rglob("generate.json") for e in json.loads(p.read_text())["episodes"]]
    assert len(episodes) == 6 and all({"checks_1_4", "checks_1_6", "calibrated"} <= set(e) for e in episodes)
    again = subprocess.run([sys.executable, "-m", "aes.cli", "report", str(sweep)], capture_output=True, text=True,
                           cwd=REPO)
    assert again.returncode == 0 and "scripted-proposer" in again.stdout
    assert "2 mode=generate" in again.stdout and not (sweep / "training.md").exists()  # no run jobs: no Table 3
    missing = subprocess.run([sys.executable, "-m", "aes.cli", "report", str(tmp_path / "nope")],
                             capture_output=True, text=True, cwd=REPO)
    assert missing.returncode == 2


def test_table8_counts_acceptance_and_rounds_per_domain_and_proposer(tmp_path):
    """Accepted = App. C.1: checks 1-4 as the domain runs them (review failures still count); rounds = revisions + 1, accepted only."""
    from aes.report.table2 import table8

    def job(name, domain, proposer, episodes):
        (tmp_path / name).mkdir()
        (tmp_path / name / "generate.json").write_text(json.dumps({
            "domain": domain, "proposer": proposer,
            "episodes": [{"checks_1_4": ok, "checks_1_6": False, "revisions": revisions} for ok, revisions in episodes]}))

    job("0", "swe", "claude", [(True, 1), (True, 2), (False, 2)])
    job("1", "swe", "claude", [(True, 0), (False, 0)])  # a second job of the same arm is pooled
    job("2", "professional", "gpt", [(False, 2), (False, 2)])
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table8(tmp_path).splitlines()[2:]}
    assert rows["swe"].startswith("| swe | claude | 5 | 60.0% [") and rows["swe"].endswith("| 2.00 |")
    assert rows["professional"].startswith("| professional | gpt | 2 | 0.0% [") and rows["professional"].endswith("| n/a |")
    assert "no mode=generate job ran" in table8(tmp_path / "0" / "nothing")


def _generate_job(root, name, episodes, **arm):
    (root / name).mkdir()
    (root / name / "generate.json").write_text(json.dumps({
        "proposer": "claude", "harness": "terminal", "domain": "terminal", "solver": "qwen", **arm,
        "episodes": [{"checks_1_4": valid, "checks_1_6": valid, "calibrated": False, "tokens": 100, "cost_usd": 0.5,
                      "stats": {"data_files": 2} if valid else {}} for valid in episodes]}))


def test_jobs_of_another_domain_or_solver_are_rows_of_their_own(tmp_path):
    from aes.report.table2 import collect

    _generate_job(tmp_path, "0", [True, False])
    _generate_job(tmp_path, "1", [True, True])  # a second seed of the same arm: pooled
    _generate_job(tmp_path, "2", [False], domain="swe")
    _generate_job(tmp_path, "3", [True], solver="local")
    rows = {(r["domain"], r["solver"]): r for r in collect(tmp_path)}
    assert set(rows) == {("terminal", "qwen"), ("swe", "qwen"), ("terminal", "local")}
    assert (rows[("terminal", "qwen")]["episodes"], rows[("terminal", "qwen")]["jobs"]) == (4, 2)
    assert rows[("terminal", "qwen")]["valid"]["k"] == 3 and rows[("swe", "qwen")]["valid"]["k"] == 0


def test_table2_csv_has_numeric_columns(tmp_path):
    import csv

    from aes.report.table2 import collect, write

    _generate_job(tmp_path, "0", [True, False, True, True])
    _generate_job(tmp_path, "1", [False], domain="swe")
    out = write(tmp_path, collect(tmp_path))
    [swe, terminal] = list(csv.DictReader(open(out["csv"])))
    assert {"valid_rate", "valid_low", "valid_high", "valid_k", "valid_n", "accepted_rate", "calibrated_n",
            "tokens_per_valid_env", "usd_per_valid_env", "domain", "solver"} <= set(terminal)
    assert (float(terminal["valid_rate"]), int(terminal["valid_k"]), int(terminal["valid_n"])) == (0.75, 3, 4)
    low, high = wilson(3, 4)
    assert float(terminal["valid_low"]) == pytest.approx(low) and float(terminal["valid_high"]) == pytest.approx(high)
    assert float(terminal["usd_per_valid_env"]) == pytest.approx(2.0 / 3) and int(terminal["episodes"]) == 4
    assert swe["usd_per_valid_env"] == "" and float(swe["valid_rate"]) == 0.0  # no valid env: no cost per valid env
    assert "75.0% [" in out["markdown"].read_text()  # the markdown keeps the readable interval


def _arm(root, name, proposer, harness, valid, cost):
    (root / name).mkdir()
    (root / name / "generate.json").write_text(json.dumps({
        "proposer": proposer, "harness": harness, "domain": "terminal", "solver": "qwen",
        "episodes": [{"checks_1_4": v, "checks_1_6": v, "calibrated": False, "tokens": 1000, "cost_usd": cost}
                     for v in valid]}))


def test_table2_in_the_papers_layout(tmp_path):
    """A row per proposer, the harnesses as columns: valid-env rate, then cost per valid env with its ratio
    to the Prompt arm of the same proposer."""
    from aes.report.table2 import collect, paper_tables

    _arm(tmp_path, "0", "claude", "prompt", [True, False, True, True], 0.5)  # $2 over 3 valid
    _arm(tmp_path, "1", "claude", "terminal", [True, True, True, True], 1.0)  # $4 over 4 valid: 1.5x
    _arm(tmp_path, "2", "gpt", "prompt", [False, False, True, False], 0.2)  # $0.8 over 1
    _arm(tmp_path, "3", "gpt", "prompt_feedback", [True, False, True, False], 0.2)  # $0.8 over 2: 0.5x
    [table] = paper_tables(collect(tmp_path))
    assert table.headers == ["proposer", "valid: Prompt", "valid: Prompt + Env Feedback",
                             "valid: AutoEnvScaling (terminal)", "cost: Prompt", "cost: Prompt + Env Feedback",
                             "cost: AutoEnvScaling (terminal)"]
    claude, gpt = table.rows
    assert claude[0] == "claude" and claude[1].startswith("75.0% [") and claude[2] == "-"
    assert claude[4:] == ["0.67", "-", "1.00 (1.5× ↑)"]
    assert gpt[4:] == ["0.80", "0.40 (0.5× ↓)", "-"]
    assert "cost per valid env (USD)" in table.title and "domain terminal, solver qwen" in table.title


def test_local_models_show_tokens_per_valid_env(tmp_path):
    from aes.report.table2 import collect, paper_tables

    _arm(tmp_path, "0", "local", "prompt", [True, False], 0.0)
    _arm(tmp_path, "1", "local", "terminal", [True, True], 0.0)
    [table] = paper_tables(collect(tmp_path))
    assert "tokens per valid env" in table.title and table.rows[0][3:] == ["2,000", "1,000 (0.5× ↓)"]


def test_table2_in_a_browser(tmp_path):
    from aes.report.table2 import collect, write
    from tests.browser import browser_page

    _arm(tmp_path, "0", "claude", "prompt", [True, False, True, True], 0.5)
    _arm(tmp_path, "1", "claude", "terminal", [True, True, True, True], 1.0)
    _arm(tmp_path, "2", "gpt", "prompt", [False, False, True, False], 0.2)
    out = write(tmp_path, collect(tmp_path))
    with browser_page() as page:
        page.goto(out["html"].as_uri())
        tables = page.locator("table.data")
        assert tables.count() == 2  # the paper's layout, then every column per arm
        paper = tables.first
        assert paper.locator("th").all_inner_texts()[:2] == ["proposer", "valid: Prompt"]
        assert paper.locator("tbody tr").count() == 2
        assert paper.locator("tbody tr").first.locator("td").last.inner_text() == "1.00 (1.5× ↑)"
        widths = page.eval_on_selector_all("figure img", "els => els.map(e => e.complete ? e.naturalWidth : 0)")
        assert widths and all(w > 300 for w in widths)
        assert "|---|" not in page.inner_text("body")
        # the tables sort on a click: by proposer, descending
        paper.locator("th").first.click()
        paper.locator("th").first.click()
        assert paper.locator("tbody tr td:first-child").all_inner_texts() == ["gpt", "claude"]
