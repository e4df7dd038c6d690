"""Table 3 and Fig. 20 of a sweep of mode=run jobs (``aes report MULTIRUN_DIR``, and the SweepReport
callback at the end of ``-m``): per arm, the benchmark at matched update counts with the spread over
seeds and the valid-env rate per generation — on real runs of ``experiment=simulated``."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from aes.report.sweep import assemble
from aes.report.training import compare, find_jobs
from tests.conftest import REPO, SEEDS

EVAL = [f"eval.tasks={SEEDS}", "eval.every=1", "eval.attempts=2"]
STATIC = "flywheel.assignments_per_round=0"


def _job(run_dir: Path, overrides: list[str]) -> None:
    """One job of a sweep as ``python -m aes.run -m`` leaves it: the run, its config.yaml and
    .hydra/overrides.yaml (the flywheel runs in-process: a job in a few seconds)."""
    from aes.compose import build_flywheel
    from aes.config import compose_config
    from aes.flywheel import Flywheel

    cfg = compose_config(overrides)
    run_dir.mkdir(parents=True)
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.structured(cfg)))
    flywheel = Flywheel(build_flywheel(cfg, run_dir))
    try:
        flywheel.run()
    finally:
        flywheel.close()


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """The flywheel x 2 seeds, a static pool (Table 3's baseline) x 1 seed, and a static pool with
    flywheel.proposer_interval=1: an arm of its own that stops after 2 updates, not 4."""
    root = tmp_path_factory.mktemp("sweep")
    jobs = [["flywheel.rounds=2"], ["flywheel.rounds=2"], [STATIC, "flywheel.rounds=2"],
            [STATIC, "flywheel.rounds=2", "flywheel.proposer_interval=1"]]
    for num, (extra, seed) in enumerate(zip(jobs, [0, 1, 0, 1])):
        _job(root / str(num), ["experiment=simulated", *EVAL, *extra, f"seed={seed}"])
    return root


def test_arms_are_the_overrides_that_differ_and_seeds_are_replicas(sweep):
    c = compare(find_jobs(sweep))
    # flywheel.proposer_interval differs too: it names the arm of job 3 alone
    assert list(c.arms) == ["flywheel.assignments_per_round=(default),flywheel.proposer_interval=(default)",
                            "flywheel.assignments_per_round=0,flywheel.proposer_interval=(default)",
                            "flywheel.assignments_per_round=0,flywheel.proposer_interval=1"]
    assert [len(js) for js in c.arms.values()] == [2, 1, 1]


def test_eval_at_matched_updates_with_the_spread_over_seeds(tmp_path, sweep):
    jobs = [j for j in find_jobs(sweep) if j.path.name != "3"]  # the flywheel x 2 seeds, the static pool x 1
    c = compare(jobs)
    flywheel, static = "flywheel.assignments_per_round=(default)", "flywheel.assignments_per_round=0"
    assert list(c.arms) == [flywheel, static]
    assert c.matched == [0, 1, 2, 3, 4]  # 2 rounds x proposer_interval 2, evaluated at update 0 and after each
    rows = {(r["arm"], r["metric"], r["update"]): r for r in c.eval_rows}
    assert {m for _, m, _ in rows} == {"avg@2", "pass@2"}
    two = rows[(flywheel, "avg@2", 4)]
    values = [next(r["eval/avg@2"] for r in j.evals if r["update"] == 4) for j in c.arms[flywheel]]
    assert two["jobs"] == 2 and two["mean"] == pytest.approx(sum(values) / 2)
    assert two["min"] == min(values) and two["max"] == max(values) and two["std"] is not None
    one = rows[(static, "avg@2", 4)]
    assert one["jobs"] == 1 and one["std"] is None  # one job: no spread claimed
    # Fig. 20: a valid-env rate for every flywheel generation; the static pool's generations ran no episode
    gens = {(r["arm"], r["generation"]): r for r in c.generation_rows}
    assert {r["step"] for r in c.generation_rows if r["arm"] == flywheel} == {0, 2}  # at the step it ran: k = 2
    assert all(gens[(flywheel, g)]["jobs"] == 2 and gens[(flywheel, g)]["episodes"] > 0 for g in (1, 2))
    assert gens[(static, 1)]["jobs"] == 0 and gens[(static, 1)]["mean"] is None
    assert gens[(static, 1)]["idle"] == ["flywheel.assignments_per_round is 0 (a static pool)"]


def test_aes_report_writes_the_comparison_and_no_empty_table2(sweep):
    proc = subprocess.run([sys.executable, "-m", "aes.cli", "report", str(sweep)], capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert not (sweep / "table2.md").exists() and not (sweep / "table2.csv").exists()
    assert not (sweep / "table8.md").exists()
    assert "found: 4 run dir(s)" in proc.stdout and "4 mode=run; 3 arm(s) of mode=run jobs" in proc.stdout
    md = (sweep / "training.md").read_text()
    # Table 3 in the paper's layout: the solver before training, then a row per setting named in words
    assert "## Table 3: avg@2 after 2 solver updates" in md and "| solver / setting | proposer scripted-proposer |" in md
    assert "| scripted (update 0, before training) |" in md
    assert "| + AutoEnvScaling; proposer interval as configured |" in md
    assert "| + static pool (no proposer); proposer interval 1 |" in md
    assert "flywheel.assignments_per_round=0" not in md.split("## Table 3")[1]  # no raw override strings past the arms
    assert "no episodes (flywheel.assignments_per_round is 0 (a static pool))" in md
    # the arm with proposer_interval 1 ran 2 updates only: its own updates are not matched
    assert md.count("| 0 |") >= 2 and "which not every arm reached" in md
    rows = list(csv.DictReader(open(sweep / "training.csv")))
    assert {r["metric"] for r in rows} == {"avg@2", "pass@2", "valid_env_rate"}
    assert {r["x"] for r in rows if r["metric"] == "valid_env_rate"} == {"step"}  # Fig. 20 per solver step
    for r in rows:
        float(r["x_value"]), int(r["jobs"])
        if r["mean"]:
            assert 0.0 <= float(r["mean"]) <= 1.0
    html = (sweep / "training.html").read_text()
    assert html.count("<img ") == 1 and "data:image/png;base64," in html  # one combined figure
    assert "<table" in html and "<pre>" not in html and "|---|" not in html  # tables as tables, not markdown


def test_a_sweep_with_nothing_to_assemble_says_what_it_found(tmp_path):
    job = tmp_path / "sweep" / "0"
    job.mkdir(parents=True)
    (job / "config.yaml").write_text("mode: eval\n")
    result = assemble(tmp_path / "sweep")
    assert result.written == {} and list((tmp_path / "sweep").iterdir()) == [job]
    assert "1 run dir(s)" in result.found and "1 mode=eval" in result.found and "nothing to assemble" in result.found
    proc = subprocess.run([sys.executable, "-m", "aes.cli", "report", str(tmp_path / "sweep")], capture_output=True,
                          text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 1 and "nothing to assemble" in proc.stderr
    missing = subprocess.run([sys.executable, "-m", "aes.cli", "report", str(tmp_path / "nope")], capture_output=True,
                             text=True, cwd=REPO, timeout=300)
    assert missing.returncode == 2 and "no such directory" in missing.stderr


@pytest.mark.slow
def test_a_run_sweep_assembles_itself_at_the_end(tmp_path):
    sweep = tmp_path / "sweep"
    proc = subprocess.run([sys.executable, "-m", "aes.run", "-m", "experiment=simulated", "flywheel.rounds=1", *EVAL,
                           f"{STATIC},3", "seed=0,1", f"hydra.sweep.dir={sweep}"], capture_output=True, text=True,
                          cwd=REPO, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "Table 3 and Fig. 20 of this sweep" in out and "Table 2 of this sweep" not in out
    assert not (sweep / "table2.md").exists()
    md = (sweep / "training.md").read_text()
    assert "| static pool (no proposer) | 2 | 0, 1 | flywheel.assignments_per_round=0 |" in md
    assert "| assignments per round 3 | 2 | 0, 1 | flywheel.assignments_per_round=3 |" in md
    assert "(n=2)" in md


def test_the_comparison_in_a_browser(sweep, tmp_path):
    """training.html as a reader sees it: the figure decodes, Table 3 is a table with settings named in
    words and a column per proposer, Fig. 20's table is per solver step; no raw markdown anywhere."""
    from tests.browser import browser_page

    assemble(sweep)
    with browser_page() as page:
        page.goto((sweep / "training.html").as_uri())
        widths = page.eval_on_selector_all("figure img", "els => els.map(e => e.complete ? e.naturalWidth : 0)")
        assert len(widths) == 1 and widths[0] > 500
        titles = page.locator("h2").all_inner_texts()
        assert any(t.startswith("Table 3: avg@2 after 2 solver updates") for t in titles), titles
        table3 = page.locator("h2:has-text('Table 3: avg@2') + div table, h2:has-text('Table 3: avg@2') + table").first
        headers = table3.locator("th").all_inner_texts()
        assert headers == ["solver / setting", "proposer scripted-proposer"]
        first_column = table3.locator("tbody tr td:first-child").all_inner_texts()
        assert first_column[0] == "scripted (update 0, before training)"
        assert "+ static pool (no proposer); proposer interval 1" in first_column
        assert not any("=" in cell for cell in first_column)  # no raw override strings
        fig20 = page.locator("h2:has-text('Fig. 20') + table").first
        assert fig20.locator("th").first.inner_text() == "solver step"
        body = page.inner_text("body")
        assert "|---|" not in body and "| solver" not in body
        page.screenshot(path=str(tmp_path / "training.png"), full_page=True)
