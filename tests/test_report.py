"""report.html: readable with one round and with hundreds; the pool, the proposer's episodes and
the config as tables; plain sentences for empty results, derived from the data."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from aes.report.html import write_report
from aes.report.plots import line_plot
from aes.report.rundata import RunData

from tests.run_dirs import EPISODE, embedded_run, synthetic_run


@pytest.fixture()
def embedded(tmp_path) -> Path:
    return embedded_run(tmp_path / "emb")


def _text(html: str) -> str:
    """The page's text, roughly as a reader sees it."""
    html = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", html, flags=re.S)
    html = re.sub(r'src="data:[^"]+"', "", html)
    text = re.sub(r"<[^>]+>", " ", html)
    import html as h

    return re.sub(r"\s+", " ", h.unescape(text))


def test_embedded_report_says_what_happened_in_sentences(embedded):
    page = write_report(embedded, title="aes run emb").read_text()
    text = _text(page)
    # the proposer's one episode: no draft, why, from the trajectory's end reasons
    assert "the proposer wrote no task files in 6 turns over 2 tries (the first and 1 revision)" in text
    assert "its replies held no command in a ```bash block" in text
    # 15 seeds are admitted: not "no calibrated envs" alone
    assert "No calibrated envs yet: 15 seed envs are admitted" in text
    assert "The pool holds 15 admitted envs: 15 seeds and 0 from the proposer" in text
    # the last round is a table row, not raw JSON with an epoch timestamp
    assert '{"no_draft": 2}' not in text and "1796086963" not in text
    assert "no draft ×2" in text and "2026-12-01 01:02:43 UTC" in text
    assert "No valid env yet, so no cost per valid env" in text


def test_embedded_report_tables_and_links_resolve(embedded):
    page = write_report(embedded).read_text()
    pool_rows = re.findall(r'<a id="env-([^"]+)"></a>', page)
    assert len(pool_rows) == 15
    # the episode row: outcome, failed stage, reason, transcript rendered by the viewer
    row = re.search(rf"<tr><td[^>]*>{EPISODE}</td>.*?</tr>", page, re.S).group(0)
    assert "broken" in row and "no draft" in row and "wrote no task files" in row
    assert f'href="viewer/proposer/{EPISODE}.html"' in row
    # every relative link points at a file or folder inside the run dir
    hrefs = [h for h in re.findall(r'href="([^"#]+)(?:#[^"]*)?"', page) if not h.startswith(("http", "data:"))]
    assert hrefs
    for href in hrefs:
        target = (embedded / href).resolve()
        assert target.exists(), href
        assert target.is_relative_to(embedded.resolve()), href
    assert "viewer/env/aes-starter-mkdir-d343a75e.html" in page
    # the effective config: the sizes summary and config.yaml
    text = _text(page)
    assert "effective sizes (mode=run, proposer=local, solver=local)" in text
    assert "smollm2-135m-instruct" in text


def test_episode_reasons_come_from_the_pool_verdicts(tmp_path):
    """A valid-but-not-admitted episode reads the calibration verdict stored in the pool."""
    from aes.pool import AssignmentLog

    from tests.conftest import make_task
    from tests.run_dirs import seed_pool

    run = tmp_path / "run"
    pool = seed_pool(run)
    parent = pool.envs()[0]
    aid = AssignmentLog(pool).open(0, parent.env_id, {"parent_env_id": parent.env_id, "parent_name": parent.name,
                                                      "direction": "harder", "round": 0})
    env, _ = pool.add(make_task(tmp_path, "draft"), name="test/draft", parent_id=parent.env_id, assignment_id=aid)
    pool.add_verdict(env.env_id, "checks_1_4", True, [], {"oracle_reward": 1.0, "nop_reward": 0.0})
    pool.set_status(env.env_id, "valid")
    pool.add_verdict(env.env_id, "calibration", False,
                     ["calibration.too_easy: mean reward 0.875 is above the band [0.25, 0.75]"], {"mean": 0.875})
    AssignmentLog(pool).close(aid, "valid", env.env_id, 0.0, 100)
    episode = RunData(run).episodes[0]
    assert episode.failed_stages == []  # no trajectory recorded it: the stage comes from the pool's verdicts
    assert (episode.outcome, episode.failed_stage) == ("valid", "calibration")
    assert episode.reason == ("passed checks 1-6 but not admitted: calibration: calibration.too_easy: mean reward 0.875 is above "
                              "the band [0.25, 0.75]")
    page = write_report(run).read_text()
    text = _text(page)
    assert "1 accepted but outside the band" in text
    assert "calibration.too_easy: mean reward 0.875" in text
    row = re.search(rf"<tr><td[^>]*>{aid}</td>.*?</tr>", page, re.S).group(0)
    assert "<td class=\"\">calibration</td>" in row  # the episodes table's failed-stage column


def test_an_open_assignment_and_an_empty_run_are_sentences(tmp_path):
    run = tmp_path / "empty"
    run.mkdir()
    text = _text(write_report(run).read_text())
    assert "No metrics yet" in text and "The pool is empty" in text
    assert "No round finished yet" in text and "No proposer episodes in this run" in text


def _drawn(series, **kw):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    line_plot(series, "round", "y", **kw)(ax)
    return fig, ax


def test_one_point_has_a_sane_axis_a_marker_and_its_value():
    import matplotlib.pyplot as plt

    fig, ax = _drawn([("reward", [1.0], [0.375])])
    lo, hi = ax.get_ylim()
    assert lo <= 0.0 and 0.375 < hi < 1.0  # from zero, not 0.36-0.39 around the value
    xlo, xhi = ax.get_xlim()
    assert (xlo, xhi) == (0.0, 2.0) and list(ax.get_xticks()) == [1.0]  # not 0.96-1.04
    line = ax.get_lines()[0]
    assert line.get_marker() == "o"
    assert [t.get_text() for t in ax.texts] == ["0.375"]
    plt.close(fig)
    fig, ax = _drawn([("rate", [1.0], [0.0])], ylim=(0, 1), percent=True)
    assert ax.get_ylim()[0] < 0.0 < 1.0 < ax.get_ylim()[1]
    assert [t.get_text() for t in ax.texts] == ["0%"]
    plt.close(fig)


def test_hundreds_of_points_are_lines_without_labels():
    import matplotlib.pyplot as plt

    xs = [float(i) for i in range(1, 601)]
    fig, ax = _drawn([("reward", xs, [(i % 7) / 7 for i in range(600)])])
    lines = ax.get_lines()
    assert lines[0].get_marker() in ("None", None, "")
    assert len(lines) == 2  # the series and its moving average
    assert not ax.texts
    plt.close(fig)


def test_report_of_hundreds_of_rounds(tmp_path):
    run = synthetic_run(tmp_path / "long", rounds=300)
    start = time.monotonic()
    page = write_report(run).read_text()
    assert time.monotonic() - start < 60
    assert page.count("<img ") >= 6
    assert len(re.findall(r'<table class="data" id="rounds-table">', page)) == 1
    rounds_table = page[page.index('id="rounds-table"'):]
    rounds_table = rounds_table[:rounds_table.index("</table>")]
    assert rounds_table.count("<tr>") == 301  # header + 300 rounds
    assert "300 rounds of 2 solver steps each: 600 DPPO updates" not in page  # no config: k is unknown
    assert "300 rounds: 600 DPPO updates (the policy is now version 600)" in _text(page)


def test_simulated_run_report(simulated_run):
    page = simulated_run / "report.html"
    text = _text(page.read_text())
    assert "The proposer ran" in text and "episodes in 2 rounds" in text
    assert "admitted: mean reward" in text
    assert (simulated_run / "viewer" / "index.html").is_file()


def _simulated(run_dir: Path, *overrides: str) -> Path:
    from aes.compose import build_flywheel
    from aes.config import compose_config
    from aes.flywheel import Flywheel

    flywheel = Flywheel(build_flywheel(compose_config(["experiment=simulated", "flywheel.rounds=2", *overrides]),
                                       run_dir))
    try:
        flywheel.run()
    finally:
        flywheel.close()
    return run_dir


@pytest.mark.parametrize("overrides,why", [
    (["flywheel.assignments_per_round=0", "flywheel.refresh=false"], "flywheel.assignments_per_round is 0 (a static pool)"),
    (["flywheel.pool_size=15", "flywheel.refresh=false"], "the pool was full (15 admitted envs, flywheel.pool_size = 15)"),
])
def test_rounds_without_episodes_have_no_valid_env_rate_and_say_why(tmp_path, overrides, why):
    """No episode is no valid-env rate (None), not a 0% a plot would draw; the round row, the plot and
    the rounds table say why none ran."""
    from aes.proposer.generate import summarize
    from aes.report.metrics import read_metrics

    assert summarize([])["valid_env_rate"] is None and summarize([])["mean_revisions"] is None
    run = _simulated(tmp_path / "run", *overrides)
    rounds = [r for r in read_metrics(run / "metrics.jsonl") if r["event"] == "round"]
    assert len(rounds) == 2
    assert all(r["episodes"] == 0 and r["valid_env_rate"] is None and r["no_episodes"] == why for r in rounds)
    text = _text(write_report(run).read_text())
    assert f"The proposer ran no episodes: {why}." in text
    assert f"No proposer episode ran in any round ({why}), so there is no valid-env rate." in text
    assert "no episodes" in _text(write_report(run).read_text().split('id="rounds-table"')[1])


def test_valid_env_rate_plot_names_checks_1_to_4_and_rounds_without_episodes(tmp_path):
    run = synthetic_run(tmp_path / "long", rounds=3)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for row in rows:
        if row["event"] == "round" and row["round"] == 2:
            row.update(episodes=0, valid_env_rate=None, no_episodes="the pool was full (40 admitted envs, "
                                                                     "flywheel.pool_size = 40)")
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = _text(write_report(run).read_text())
    assert "valid = the finally submitted env passed admission checks 1-4" in text
    # "valid" means checks 1-4 wherever the report says it; passing checks 1-6 is "accepted"
    assert re.findall(r"valid[^.;]{0,60}checks 1-(\d)", text) and set(re.findall(r"valid[^.;]{0,60}checks 1-(\d)", text)) == {"4"}
    assert "accepted: envs that passed checks 1-6" in text
    assert ("no point for 1 round without proposer episodes (the pool was full (40 admitted envs, "
            "flywheel.pool_size = 40))") in text
