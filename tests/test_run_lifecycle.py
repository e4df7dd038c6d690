"""A run's life in its run dir: one writer at a time, dirs that never collide, a stop on Ctrl-C in
any phase and a resume that loses and duplicates nothing — on the simulated flywheel
(``experiment=simulated``: the whole loop in seconds, no Docker, no model)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from aes import interrupt
from aes.compose import build_flywheel
from aes.config import compose_config
from aes.flywheel import Flywheel
from aes.generation import round_results
from aes.pool import AssignmentLog, PoolStore
from aes.report.metrics import read_metrics, row_key
from aes.spend import read_spend
from tests.conftest import REPO

ROUNDS = 3
SIM = ["experiment=simulated", f"flywheel.rounds={ROUNDS}"]


class Run:
    """``python -m aes.run ARGS`` in the background, its output in a file (a pipe nobody reads would fill
    up and block it)."""

    def __init__(self, *args: str, cwd: Path = REPO, out: Path):
        self.out = out
        with open(out, "w") as fh:
            self.proc = subprocess.Popen([sys.executable, "-m", "aes.run", *args], cwd=cwd, stdout=fh,
                                         stderr=subprocess.STDOUT, text=True)
        self.pid = self.proc.pid

    def wait(self, timeout: float = 600) -> tuple[int, str]:
        self.proc.wait(timeout=timeout)
        return self.proc.returncode, self.out.read_text(errors="replace")


def wait_for(predicate, what: str, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def log_has(path: Path, text: str) -> bool:
    return path.is_file() and text in path.read_text(errors="replace")


# -- one writer, fresh dirs ------------------------------------------------------------------------
def test_a_second_run_in_the_same_dir_refuses_and_names_the_first(tmp_path):
    run_dir = tmp_path / "run"
    first = Run("experiment=simulated", "flywheel.rounds=12", f"hydra.run.dir={run_dir}", out=tmp_path / "first.out")
    try:
        wait_for(lambda: log_has(run_dir / "run.log", "generation 1 of"), "the first run's first generation")
        overrides = (run_dir / ".hydra" / "overrides.yaml").read_text()
        second = subprocess.run([sys.executable, "-m", "aes.run", "experiment=simulated", "flywheel.rounds=2",
                                 f"hydra.run.dir={run_dir}"], cwd=REPO, capture_output=True, text=True, timeout=300)
        out = second.stdout + second.stderr
        assert first.proc.poll() is None, "the first run must still be running for the refusal to mean anything"
        assert second.returncode == 2 and "Traceback" not in out, out
        [line] = [line for line in out.splitlines() if line.strip()]
        assert f"{run_dir.resolve()} is in use by another aes run (pid {first.pid} on " in line
        assert "flywheel.rounds=12" in line  # the holder's command
        assert (run_dir / ".hydra" / "overrides.yaml").read_text() == overrides  # the refused run wrote nothing
        assert "flywheel.rounds=2" not in (run_dir / "run.log").read_text()
    finally:
        status, out = first.wait()
    assert status == 0, out[-3000:]
    rows = read_metrics(run_dir / "metrics.jsonl")
    keys = [row_key(r) for r in rows if row_key(r)]
    assert len(keys) == len(set(keys))  # nothing duplicated
    assert sorted(r["round"] for r in rows if r["event"] == "round") == list(range(1, 13))


def test_runs_started_in_the_same_second_get_their_own_dirs(tmp_path):
    """Two runs whose dir pattern resolves to the same name (as two default runs started in the same
    second do): the second claims ``NAME-2``; both finish, each in its own dir."""
    pattern = "hydra.run.dir=${aes.fresh_dir:outputs/same}"
    runs = [Run("experiment=simulated", "flywheel.rounds=1", pattern, cwd=tmp_path, out=tmp_path / f"{i}.out")
            for i in range(2)]
    done = [run.wait() for run in runs]
    outs = [out for _, out in done]
    assert [status for status, _ in done] == [0, 0], outs
    dirs = sorted(p.name for p in (tmp_path / "outputs").iterdir())
    assert dirs == ["same", "same-2"]
    for name in dirs:
        assert [r["round"] for r in read_metrics(tmp_path / "outputs" / name / "metrics.jsonl")
                if r["event"] == "round"] == [1]
    assert all("resume=" in out and "writing to" in out for out in outs)  # the dir and the resume line, at start


def test_fresh_dirs_and_the_default_patterns(tmp_path):
    from aes.rundir import fresh_dir

    made = [fresh_dir(str(tmp_path / "a" / "12-00-00")) for _ in range(3)]
    assert [Path(m).name for m in made] == ["12-00-00", "12-00-00-2", "12-00-00-3"]
    conf = (REPO / "conf" / "config.yaml").read_text()
    assert "dir: ${aes.run_dir:${resume},outputs/${now:%Y-%m-%d}/${now:%H-%M-%S}}" in conf
    assert "dir: ${aes.fresh_dir:multirun/${now:%Y-%m-%d}/${now:%H-%M-%S}}" in conf


# -- a stop in every phase, then a resume (in process) ----------------------------------------------
def _phase_of(agent, logs_to) -> str:
    """The phase a simulated trial belongs to, by its batch (the dir its logs would go to)."""
    if logs_to is None:
        return "admission"  # the reference and do-nothing runs of a draft, inside a proposer episode
    batch = Path(logs_to).parent.name
    for marker, phase in (("-assign", "parent_rollouts"), ("-train", "solver_rollouts"), ("-refresh", "refresh"),
                          ("eval-", "eval")):
        if marker in batch:
            return phase
    return "calibration"


def _stop_during(flywheel: Flywheel, phase: str, seen: Counter, after: int = 3) -> None:
    """Ask for a stop (what the signal handler does) from inside ``phase``, ``after`` of its steps in;
    ``seen`` counts the phase's steps."""

    def stopping(original):
        def call(*args, **kwargs):
            seen[phase] += 1
            interrupt.request()
            return original(*args, **kwargs)
        return call

    if phase == "update":  # the update itself runs to its end (and its checkpoint); the loop stops after it
        flywheel.solver.update = stopping(flywheel.solver.update)
        return
    if phase == "reflection":  # the reflection's model call is where it stops
        import aes.proposer.reflection as reflection

        flywheel._restore = (reflection, reflection.reflect)
        reflection.reflect = stopping(reflection.reflect)
        return
    trials = flywheel.parts.trials.trials  # the simulated runner inside StopBeforeTrial
    original_run = trials.run

    def run(task, agent, image=None, logs_to=None):
        kind = _phase_of(agent, logs_to)
        seen[kind] += 1
        if kind == phase and seen[kind] == after:
            interrupt.request()
        return original_run(task, agent, image, logs_to)

    trials.run = run


def _run(cfg, run_dir: Path, phase: str | None = None, seen: Counter | None = None) -> None:
    flywheel = Flywheel(build_flywheel(cfg, run_dir))
    if phase:
        _stop_during(flywheel, phase, seen)
    try:
        flywheel.run()
    finally:
        restore = getattr(flywheel, "_restore", None)
        if restore:
            setattr(restore[0], "reflect", restore[1])
        flywheel.close()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("whole")
    _run(compose_config(SIM + ["eval.tasks=" + str(REPO / "tests" / "fixtures" / "flywheel_seeds"), "eval.every=2",
                               "eval.attempts=2"]), run_dir)
    return run_dir


def _counted(run_dir: Path) -> dict:
    rows = read_metrics(run_dir / "metrics.jsonl")
    return {"rounds": [r["round"] for r in rows if r["event"] == "round"],
            "steps": sorted(r["step"] for r in rows if r["event"] in ("update", "no_update")),
            "evals": sorted(r["update"] for r in rows if r["event"] == "eval"),
            "round_1_episodes": next(r["episodes"] for r in rows if r["event"] == "round" and r["round"] == 1),
            "tokens": read_spend(run_dir / "spend.json")["tokens"]}


@pytest.mark.parametrize("phase", ["parent_rollouts", "admission", "calibration", "reflection", "eval",
                                   "solver_rollouts", "update", "refresh"])
def test_a_stop_in_any_phase_then_a_resume_loses_and_duplicates_nothing(tmp_path, uninterrupted, phase):
    cfg = compose_config(SIM + ["eval.tasks=" + str(REPO / "tests" / "fixtures" / "flywheel_seeds"), "eval.every=2",
                                "eval.attempts=2"])
    run_dir = tmp_path / "run"
    seen: Counter = Counter()
    try:
        with pytest.raises(interrupt.Interrupted):
            _run(cfg, run_dir, phase, seen)
    finally:
        interrupt.reset()
    assert seen[phase] >= (1 if phase in ("update", "reflection") else 3)  # the stop came from inside the phase
    pool = PoolStore(run_dir / "pool")
    spent = read_spend(run_dir / "spend.json")
    open_before = [r for r in AssignmentLog(pool).rows() if r["status"] == "open"]
    if phase == "admission":  # the episode cut short is set aside, unscored, its assignment open
        assert open_before
        aside = list((run_dir / "proposer" / "infrastructure_failures").glob("*.json"))
        assert aside and all(json.loads(p.read_text())["extra"]["infrastructure_error"].startswith("stopped by")
                             for p in aside)
    _run(cfg, run_dir)  # the resume: a new process would do the same (see the subprocess test below)

    rows = read_metrics(run_dir / "metrics.jsonl")
    keys = [row_key(r) for r in rows if row_key(r)]
    assert len(keys) == len(set(keys)), Counter(keys).most_common(3)  # no duplicate row
    assert _counted(run_dir) == _counted(uninterrupted)  # rounds, steps, evaluations, episodes, tokens
    assert read_spend(run_dir / "spend.json")["tokens"] >= spent["tokens"]  # what the stopped session spent is kept
    assignments = AssignmentLog(pool).rows()
    assert assignments and all(r["status"] == "closed" and r["result"] for r in assignments)
    for row in (r for r in rows if r["event"] == "round"):
        results = round_results(pool, row["round"] - 1)  # every episode of the round, both sessions'
        assert row["episodes"] == len(results) == len([a for a in assignments if a["round"] == row["round"] - 1])
        valid = sum(r.checks_1_4 for r in results)
        assert row["valid"] == valid and row["valid_env_rate"] == (valid / len(results) if results else None)
    last = [r for r in rows if r["event"] == "round"][-1]
    assert last["tokens"] == read_spend(run_dir / "spend.json")["tokens"]
    assert pool.check() == [] and len(pool.envs("admitted")) <= cfg.flywheel.pool_size


# -- Ctrl-C on the command line, then resume=RUN_DIR ------------------------------------------------
def test_ctrl_c_prints_how_to_resume_and_resume_finishes_the_run(tmp_path):
    run_dir = tmp_path / "run"
    run = Run("experiment=simulated", "flywheel.rounds=8", "budget.max_tokens=1000000", f"hydra.run.dir={run_dir}",
              out=tmp_path / "run.out")
    wait_for(lambda: log_has(run_dir / "run.log", "generation 3 of"), "the third generation")
    run.proc.send_signal(signal.SIGINT)
    status, out = run.wait(300)
    assert status == 130, out[-3000:]
    assert "Traceback" not in out
    assert f"writing to {run_dir.resolve()}; to resume after Ctrl-C" in out  # said at the start
    [stopped] = [line for line in out.splitlines() if "resume with:" in line]  # one line says how to go on
    assert "stopped by Ctrl-C" in stopped and f"resume with: python -m aes.run resume={run_dir.resolve()}" in stopped
    rounds = [r["round"] for r in read_metrics(run_dir / "metrics.jsonl") if r["event"] == "round"]
    assert rounds and max(rounds) < 8

    resumed = subprocess.run([sys.executable, "-m", "aes.run", f"resume={run_dir}", "flywheel.rounds=9"], cwd=REPO,
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]
    rows = read_metrics(run_dir / "metrics.jsonl")
    assert [r["round"] for r in rows if r["event"] == "round"] == list(range(1, 10))  # its config, one value changed
    keys = [row_key(r) for r in rows if row_key(r)]
    assert len(keys) == len(set(keys))
    config = (run_dir / "config.yaml").read_text()
    assert "rounds: 9" in config and "max_tokens: 1000000" in config and "backend: simulated" in config
    overrides = (run_dir / ".hydra" / "overrides.yaml").read_text()
    assert "experiment=simulated" in overrides and "flywheel.rounds=9" in overrides and "resume" not in overrides
    assert (run_dir / "report.html").is_file()


def test_resume_refuses_what_it_cannot_do(tmp_path):
    for args, expected in (([f"resume={tmp_path / 'nothing'}"], "no such directory"),
                           ([f"resume={tmp_path}"], "no config.yaml there"),):
        proc = subprocess.run([sys.executable, "-m", "aes.run", *args], cwd=REPO, capture_output=True, text=True,
                              timeout=300)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 2 and expected in out and "Traceback" not in out, out
    (tmp_path / "config.yaml").write_text("mode: run\n")
    proc = subprocess.run([sys.executable, "-m", "aes.run", f"resume={tmp_path}", "proposer=claude"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "keeps the groups" in out and "Traceback" not in out, out


def test_the_budget_holds_across_sessions(tmp_path):
    """What earlier sessions spent counts: a resumed run over budget.max_tokens makes no model call."""
    from aes.models import BudgetExhausted
    from aes.models.base import ChatResult, Usage
    from aes.config import BudgetConfig
    from aes.spend import RecordedBudget

    first = RecordedBudget(BudgetConfig(max_tokens=100), tmp_path / "spend.json")
    first.charge(ChatResult(text="x", usage=Usage(prompt_tokens=60, completion_tokens=50), cost_usd=0.25))
    again = RecordedBudget(BudgetConfig(max_tokens=100), tmp_path / "spend.json")
    assert again.summary() == {"cost_usd": 0.25, "tokens": 110, "model_calls": 1}
    assert again.session() == {"cost_usd": 0.0, "tokens": 0, "model_calls": 0}
    with pytest.raises(BudgetExhausted, match="110 tokens of budget.max_tokens=100"):
        again.check()
    interrupt.request()
    try:
        with pytest.raises(interrupt.Interrupted):
            RecordedBudget(None, tmp_path / "other.json").check()  # a requested stop ends the next model call
    finally:
        interrupt.reset()


def test_the_report_of_a_stopped_and_of_a_resumed_run_in_a_browser(tmp_path):
    """What a reader sees: after the stop, the episodes cut short are "interrupted", not scored, with how
    to go on; after the resume, every round's row is whole and the model calls of both sessions count."""
    from aes.report.html import write_report
    from tests.browser import browser_page

    cfg = compose_config(SIM)
    run_dir = tmp_path / "run"
    seen: Counter = Counter()
    try:
        with pytest.raises(interrupt.Interrupted):
            _run(cfg, run_dir, "admission", seen)
    finally:
        interrupt.reset()
    stopped = write_report(run_dir, title="stopped")
    with browser_page() as page:
        page.goto(stopped.as_uri())
        rows = page.locator("table#episodes-table tbody tr")
        interrupted = [rows.nth(i).inner_text() for i in range(rows.count()) if "interrupted" in rows.nth(i).inner_text()]
        assert interrupted and all("not scored: the assignment stays open and a resume redoes it" in r
                                   for r in interrupted)
        page.screenshot(path=str(tmp_path / "stopped.png"), full_page=True)

    _run(cfg, run_dir)
    resumed = write_report(run_dir, title="resumed")
    spend = read_spend(run_dir / "spend.json")
    rows = [r for r in read_metrics(run_dir / "metrics.jsonl") if r["event"] == "round"]
    with browser_page() as page:
        page.goto(resumed.as_uri())
        summary = page.inner_text("#summary + ul")
        assert f"Model calls so far: {spend['model_calls']} calls, {spend['tokens']:,} tokens, $0.00." in summary
        assert f"The proposer ran {sum(r['episodes'] for r in rows)} episodes in {ROUNDS} rounds" in summary
        assert "interrupted" not in page.inner_text("table#episodes-table")  # every one was redone
        table = page.locator("table#rounds-table")
        headers = table.locator("th").all_inner_texts()
        assert ["valid", "accepted", "entered pool"] == headers[5:8]
        shown = table.locator("tbody tr")
        assert shown.count() == ROUNDS
        for i, row in enumerate(rows):
            cells = shown.nth(i).locator("td").all_inner_texts()
            assert cells[4] == str(row["episodes"]) and cells[6] == str(row["accepted"])
            assert cells[7] == str(row["entered_pool"])
        widths = page.eval_on_selector_all("figure img", "els => els.map(e => e.complete ? e.naturalWidth : 0)")
        assert len(widths) >= 5 and all(w > 100 for w in widths)
        page.screenshot(path=str(tmp_path / "resumed.png"), full_page=True)


def test_a_row_logged_again_replaces_the_earlier_one(tmp_path):
    """A resumed run redoes a step whose row a kill left behind: one row per thing counted remains."""
    from aes.config import LoggerConfig
    from aes.report.metrics import MetricsLogger

    metrics = MetricsLogger(LoggerConfig(), tmp_path)
    metrics.log({"event": "update", "update": 1, "step": 1, "solver_reward_mean": 0.1})
    metrics.log({"event": "round", "round": 1, "episodes": 2})
    metrics.log({"event": "sft_step", "step": 1})
    again = MetricsLogger(LoggerConfig(), tmp_path)  # the resumed session
    again.log({"event": "update", "update": 1, "step": 1, "solver_reward_mean": 0.2})
    again.log({"event": "update", "update": 2, "step": 2, "solver_reward_mean": 0.3})
    again.log({"event": "sft_step", "step": 1})  # no identity: appended
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [(r["event"], r.get("update"), r.get("solver_reward_mean")) for r in rows] == [
        ("round", None, None), ("sft_step", None, None), ("update", 1, 0.2), ("update", 2, 0.3), ("sft_step", None, None)]
