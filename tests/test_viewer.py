"""``aes view``: static HTML of a run's ATIF trajectories, and report.html, checked as pages and in a
real headless browser (tests/browser.py: skips without one, fails under AES_REQUIRE_BROWSER=1)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aes.cli import app
from aes.report.html import write_report
from aes.report.viewer import build

from tests.browser import browser_page
from tests.conftest import REPO
from tests.run_dirs import EPISODE, embedded_run

MKDIR = "aes-starter-mkdir-d343a75e"


@pytest.fixture()
def embedded(tmp_path) -> Path:
    return embedded_run(tmp_path / "emb")


def test_view_writes_an_index_and_a_page_per_trajectory(embedded, tmp_path):
    out = tmp_path / "pages"
    result = CliRunner().invoke(app, ["view", str(embedded), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "13 trajectories, 13 page(s) rendered now" in result.output
    index = (out / "index.html").read_text()
    assert EPISODE in index and MKDIR in index and "Solver attempts (12) on 3 envs" in index
    env_page = (out / "env" / f"{MKDIR}.html").read_text()
    assert env_page.count("attempt ") >= 4 and "u0000-s00000-train" in env_page and "max_turns" in env_page
    attempt = (out / "solver" / MKDIR / "local" / "u0000-s00000-train" / "0.html").read_text()
    # the conversation step by step, not raw JSON
    for shown in ("You are an expert at the Linux command line", "Create the directory `/app/output`",
                  "$ mkdir -p /app/output", "exit code 0", "3 passed in 0.02s", "it ran out of turns",
                  "130 prompt + 11 completion tokens"):
        assert shown.replace("`", "`") in attempt.replace("&#x27;", "'").replace("&quot;", '"'), shown
    assert '"schema_version"' not in attempt
    # links from a page outside the run dir still reach the raw JSON
    raw = re.search(r'href="([^"]+0\.json)"', attempt).group(1)
    assert (attempt_dir := out / "solver" / MKDIR / "local" / "u0000-s00000-train").joinpath(raw).resolve().is_file()
    proposer = (out / "proposer" / f"{EPISODE}.html").read_text()
    assert "the proposer wrote no task files in 6 turns" in proposer
    assert "No task was handed in" in proposer and "format_errors" in proposer
    assert attempt_dir.is_dir()


def test_view_renders_again_only_what_changed(embedded):
    first = build(embedded)
    assert first.rendered == 13
    assert build(embedded).rendered == 0
    src = embedded / "trajectories" / MKDIR / "local" / "u0000-s00000-train" / "1.json"
    src.write_text(src.read_text())
    assert build(embedded).rendered == 1


def test_view_of_a_missing_dir_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(app, ["view", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "no such directory" in result.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_view_serve(embedded):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "aes.cli", "view", str(embedded), "--serve", str(port)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}/viewer/index.html"
        for _ in range(100):
            try:
                body = urllib.request.urlopen(url, timeout=2).read().decode()
                break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail(f"nothing served at {url}")
        assert EPISODE in body
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/viewer/proposer/{EPISODE}.html", timeout=5).read()
        assert b"wrote no task files" in page
        raw = urllib.request.urlopen(f"http://127.0.0.1:{port}/proposer/proposer_trajectories/{EPISODE}.json", timeout=5)
        assert raw.status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# -- in a real browser ------------------------------------------------------------------------------
def test_report_in_a_browser(embedded, tmp_path):
    """The embedded default's report: the pool table, the episode with its reason, plots that load."""
    report = write_report(embedded, title="aes run emb")
    with browser_page() as page:
        page.goto(report.as_uri())
        assert page.title() == "aes run emb"
        assert page.locator("table#pool-table tbody tr").count() == 15
        episode = page.locator("table#episodes-table tbody tr").first
        assert "broken" in episode.inner_text() and "wrote no task files in 6 turns" in episode.inner_text()
        assert "No calibrated envs yet: 15 seed envs are admitted" in page.inner_text("#summary + ul")
        images = page.locator("figure img")
        assert images.count() >= 4
        widths = page.eval_on_selector_all("figure img", "els => els.map(e => e.complete ? e.naturalWidth : 0)")
        assert all(w > 100 for w in widths), widths  # every plot decoded
        assert page.locator("figure.none .empty").first.inner_text().startswith("No valid env yet")
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        # sorting and filtering work: the pool table's filter hides the rows that do not match
        page.fill("input[data-table=pool-table]", "starter-mkdir")
        assert page.locator("table#pool-table tbody tr:visible").count() == 1
        # the transcript link opens the viewer's page of the episode, step by step
        episode.locator("a", has_text="transcript").click()
        page.wait_for_load_state()
        assert page.url.endswith(f"viewer/proposer/{EPISODE}.html")
        assert page.locator("section.step").count() == 9
        assert page.locator("section.step.agent").count() == 6
        assert "wrote no task files" in page.inner_text("dl.kv")
        page.screenshot(path=str(tmp_path / "episode.png"), full_page=True)
    assert (tmp_path / "report.png").stat().st_size > 20_000


def test_a_solver_attempt_in_a_browser(embedded, tmp_path):
    viewer = build(embedded)
    with browser_page() as page:
        page.goto(viewer.index.as_uri())
        page.locator("table#envs-table a", has_text=MKDIR).click()
        page.wait_for_load_state()
        page.locator("table#attempts-table a", has_text="attempt 0").first.click()
        page.wait_for_load_state()
        steps = page.locator("section.step")
        assert [steps.nth(i).get_attribute("class") for i in range(3)] == ["step system", "step user", "step agent"]
        assert "$ mkdir -p /app/output" in page.inner_text("body")
        assert page.locator(".obs .badge.ok", has_text="exit code 0").count() == 2
        assert "3 passed in 0.02s" in page.inner_text("body")
        page.screenshot(path=str(tmp_path / "attempt.png"), full_page=True)
