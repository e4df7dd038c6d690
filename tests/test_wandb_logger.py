"""logger=wandb, offline: every metrics.jsonl row arrives (one monotonic step for all rows), with
the resolved config, the run's name, group and tags, no wall-clock ``time`` metric, and
report.html as an artifact — read back from the offline run's .wandb file."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from aes.config import LoggerConfig
from aes.report.metrics import MetricsLogger, read_metrics, wandb_identity, wandb_row
from aes.report.wandb_file import offline_runs, read_run

from tests.conftest import REPO


def test_every_row_of_a_run_arrives_in_wandb(simulated_run):
    rows = read_metrics(simulated_run / "metrics.jsonl")
    events = {r["event"] for r in rows}
    assert {"update", "round", "refresh"} <= events  # the round row used to be dropped ("Tried to log to step 0")
    runs = offline_runs(simulated_run)
    assert len(runs) == 1
    run = read_run(runs[0])
    assert [h["_step"] for h in run.history] == list(range(len(rows)))  # one monotonic step, one per row
    for row, logged in zip(rows, run.history):
        # every key of the row arrived with its value (a nested dict as key/sub, an empty one as null),
        # checked against the read-back run, not against anything computed from the row
        for key, value in _leaves(row):
            assert key in logged, (row["event"], key)
            assert logged[key] == value, (row["event"], key, logged[key], value)
        want = wandb_row(row)
        for key, value in want.items():
            assert key in logged, (row["event"], key)
            assert logged[key] == value, (row["event"], key, logged[key], value)
        assert "time" not in logged  # wandb keeps its own _timestamp
    # nested dicts as key/sub: a round's failures by stage
    assert any(k.startswith("failures_by_stage/") or k == "failures_by_stage" for h in run.history for k in h)
    # the resolved config (config.yaml of the run dir)
    assert run.config["flywheel"]["rounds"] == 2
    assert run.config["logger"]["name"] == "wandb" and run.config["mode"] == "run"
    # name and tags; a single run has no group
    assert run.name == simulated_run.name
    assert {"mode=run", "proposer=scripted-proposer", "solver=scripted", "harness=scripted", "test"} <= set(run.tags)
    assert run.group == ""
    # report.html uploaded at the end
    assert {"name": f"report-{run.run_id}", "type": "report", "files": ["report.html"]} in run.artifacts


def _leaves(row: dict, prefix: str = ""):
    """(key, value) of every leaf of a metrics row but its wall-clock time, nested keys joined by /."""
    for key, value in row.items():
        if not prefix and key == "time":
            continue
        if isinstance(value, dict) and value:
            yield from _leaves(value, f"{prefix}{key}/")
        else:
            yield f"{prefix}{key}", (None if isinstance(value, dict) else value)


def test_rows_of_a_resumed_run_go_on_counting(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = LoggerConfig(name="wandb", project="aes-test")
    first = MetricsLogger(cfg, tmp_path, config={"seed": 1})
    first.log({"event": "update", "update": 1, "x": 0.5}, step=1)
    first.log({"event": "round", "round": 1, "failures_by_stage": {}}, step=1)  # same caller step: not dropped
    first.close()
    time.sleep(1.1)  # wandb names an offline run dir by the second it started: a resume gets its own
    second = MetricsLogger(cfg, tmp_path, config={"seed": 1})
    second.log({"event": "update", "update": 2, "x": 0.7}, step=2)
    second.close()
    runs = [read_run(p) for p in offline_runs(tmp_path)]
    steps = [h["_step"] for r in runs for h in r.history]
    assert steps == [0, 1, 2]
    assert runs[0].history[1]["event"] == "round" and runs[0].history[1]["failures_by_stage"] is None
    assert runs[1].history[0]["x"] == 0.7
    assert not runs[0].artifacts  # no report.html in this dir: nothing to upload


def _hydra(num: int, overrides: str, sweep: str, params: dict | None = None):
    from hydra.types import RunMode

    return SimpleNamespace(mode=RunMode.MULTIRUN, sweep=SimpleNamespace(dir=sweep),
                           sweeper=SimpleNamespace(params=params),
                           overrides=SimpleNamespace(task=["experiment=paper_frontier", overrides]),
                           job=SimpleNamespace(num=num, override_dirname=f"experiment=paper_frontier,{overrides}",
                                               name="run"))


def test_multirun_jobs_are_grouped_by_their_sweep(tmp_path):
    cfg = LoggerConfig(name="wandb")
    config = {"mode": "generate", "proposer": {"name": "claude"}, "harness": {"name": "terminal"}}
    params = {"harness": "prompt,terminal"}  # a sweep config's hydra.sweeper.params
    a = wandb_identity(cfg, tmp_path / "0", config, _hydra(0, "harness=prompt", str(tmp_path / "sweep"), params))
    b = wandb_identity(cfg, tmp_path / "1", config, _hydra(1, "harness=terminal", str(tmp_path / "sweep"), params))
    assert a["group"] == b["group"] and a["group"].endswith("sweep")
    assert (a["name"], b["name"]) == ("0:harness=prompt", "1:harness=terminal")
    assert a["job_type"] == "run"
    assert a["tags"] == ["mode=generate", "proposer=claude", "harness=terminal"]
    named = LoggerConfig(name="wandb", group="table2", run_name="mine", tags=["paper", "harness=terminal"])
    c = wandb_identity(named, tmp_path / "0", config, _hydra(0, "x=1", str(tmp_path / "sweep")))
    assert (c["group"], c["name"]) == ("table2", "mine")
    assert c["tags"] == ["mode=generate", "proposer=claude", "harness=terminal", "paper"]
    unknown = wandb_identity(cfg, tmp_path / "0", config, _hydra(3, "x=1", str(tmp_path / "sweep")))
    assert unknown["name"] == "3:experiment=paper_frontier,x=1"  # no multirun.yaml, no params: every override
    single = wandb_identity(cfg, tmp_path / "run7", config, hydra=None)
    assert single["group"] is None and single["name"] == "run7"


@pytest.mark.slow
def test_a_multirun_sweep_lands_in_one_wandb_group(tmp_path):
    sweep = tmp_path / "sweep"
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DISABLE_GIT": "true"}
    proc = subprocess.run([sys.executable, "-m", "aes.run", "-m", "experiment=simulated", "flywheel.rounds=1",
                           "logger=wandb", "seed=0,1", f"hydra.sweep.dir={sweep}"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = sorted(p.parent for p in sweep.glob("*/metrics.jsonl"))
    assert [j.name for j in jobs] == ["0", "1"]
    runs = [read_run(p) for job in jobs for p in offline_runs(job)]
    assert len(runs) == 2
    assert runs[0].group == runs[1].group != "" and runs[0].group.endswith("sweep")
    assert [r.name for r in runs] == ["0:seed=0", "1:seed=1"]
    for job, run in zip(jobs, runs):
        assert len(run.history) == len(read_metrics(job / "metrics.jsonl"))


def _offline(tmp_path, *overrides: str) -> tuple:
    """``python -m aes.run ... logger=wandb`` offline; its metrics rows and the wandb run read back."""
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DISABLE_GIT": "true"}
    env.pop("WANDB_API_KEY", None)
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "aes.run", *overrides, "experiment=simulated", "logger=wandb",
                           f"hydra.run.dir={run_dir}"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [offline] = offline_runs(run_dir)
    return run_dir, read_metrics(run_dir / "metrics.jsonl"), read_run(offline)


def test_generate_sends_its_table2_summary_to_wandb(tmp_path):
    import json

    run_dir, rows, run = _offline(tmp_path, "mode=generate", "assignments=3")
    summary = json.loads((run_dir / "generate.json").read_text())["summary"]
    [row] = rows
    assert row["event"] == "generate" and (row["proposer"], row["harness"]) == ("scripted-proposer", "scripted")
    [logged] = run.history
    for key in ("episodes", "valid", "valid_env_rate", "accepted", "calibrated", "tokens", "cost_usd"):
        assert logged[key] == summary[key], key
    for key in ("rate", "low", "high", "k", "n"):  # the intervals, nested as key/sub
        assert logged[f"valid_ci/{key}"] == summary["valid_ci"][key]
    assert logged["episodes"] == 3 and run.config["mode"] == "generate" and "mode=generate" in run.tags


def test_eval_sends_its_scores_to_wandb(tmp_path):
    import json

    from tests.conftest import SEEDS

    run_dir, rows, run = _offline(tmp_path, "mode=eval", f"tasks={SEEDS}", "k=2")
    report = json.loads((run_dir / "eval.json").read_text())
    [logged] = run.history
    assert logged["event"] == "eval" and logged["eval/tasks"] == len(report["tasks"]) == 15
    assert logged["eval/avg@2"] == report["avg_at_k"] and logged["eval/pass@2"] == report["pass_at_k"]
    assert rows[0]["eval/avg@2"] == report["avg_at_k"] and run.config["mode"] == "eval"
