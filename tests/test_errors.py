"""Errors a user makes end in one message with what to do, and the right exit status:
usage errors 2, a model that cannot start 1, never a traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from aes.config import ConfigError, compose_config, load_config
from tests.conftest import REPO


def run_entry(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "COLUMNS": "400", **(env or {})})


def test_validate_a_missing_path_is_a_usage_error(tmp_path):
    proc = run_entry("aes.cli", "validate", str(tmp_path / "no_such_task"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2  # not 1, the status of an invalid task
    assert "does not exist" in out and "no_such_task" in out and "Traceback" not in out


@pytest.mark.parametrize("mode", ["validate", "eval"])
def test_a_missing_tasks_path_of_the_run_entry_is_one_usage_error(tmp_path, mode):
    proc = run_entry("aes.run", f"mode={mode}", "tasks=/does/not/exist", f"hydra.run.dir={tmp_path}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out  # not 1, the status of an invalid task
    errors = [line for line in out.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "/does/not/exist" in errors[0] and "tasks=" in errors[0]
    assert not (tmp_path / "validation.json").exists()


def test_cli_config_errors_are_usage_errors(tmp_path):
    proc = run_entry("aes.cli", "validate", str(tmp_path), "--set", "sandbox.concurency=2")
    assert proc.returncode == 2
    assert "sandbox.concurency" in proc.stderr and "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("override", ["+trainer.lerning_rate=1", "+lerning_rate=1", "+admission.rubric.0.extra=1"])
def test_unknown_keys_are_refused_even_with_plus(override):
    key = override[1:].split("=")[0].replace(".0.", "[0].")
    with pytest.raises(ConfigError, match="unknown config key " + re.escape(key)):
        compose_config([override])


def test_unknown_keys_are_refused_in_plain_dicts_too():
    with pytest.raises(ConfigError, match=r"trainer\.deepspeed\.zero_stag \(did you mean trainer\.deepspeed\.zero_stage\?\)"):
        load_config({"trainer": {"deepspeed": {"zero_stag": 2}}})
    with pytest.raises(ConfigError, match=r"admission\.rubric\[0\]\.requirment"):
        load_config({"admission": {"rubric": [{"name": "a", "requirment": "b"}]}})


def test_free_form_mappings_still_take_new_keys():
    cfg = compose_config(["+sandbox.image_aliases.myimage=aes-base:bookworm"])
    assert cfg.sandbox.image_aliases["myimage"] == "aes-base:bookworm"
    from aes.config.load import unknown_keys

    assert unknown_keys({"cluster": {"env": {"NCCL_DEBUG": "INFO"}}, "hydra": {"x": 1}}) == ["hydra"]


def test_the_run_entry_point_refuses_an_unknown_key(tmp_path):
    proc = run_entry("aes.run", "mode=validate", "+trainer.lerning_rate=1", f"hydra.run.dir={tmp_path}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "trainer.lerning_rate" in out and "Traceback" not in out


def test_a_missing_api_key_ends_in_one_message(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    proc = subprocess.run([sys.executable, "-m", "aes.run", "mode=generate", "proposer=claude",
                           f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, cwd=REPO, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert "Traceback" not in out
    errors = [line for line in out.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "ANTHROPIC_API_KEY" in errors[0] and "set the environment variable" in errors[0]


def one_error(proc: subprocess.CompletedProcess) -> str:
    """The run's one ERROR line (and no traceback)."""
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out[-3000:]
    errors = [line for line in out.splitlines() if "ERROR" in line or line.startswith("error:")]
    assert len(errors) == 1, out[-3000:]
    return errors[0]


def test_a_malformed_seed_is_one_usage_error_naming_it(tmp_path):
    import shutil

    from tests.conftest import FIXTURES

    seeds = tmp_path / "seeds"
    shutil.copytree(FIXTURES.parent / "flywheel_seeds" / "coin-a", seeds / "coin-a")
    shutil.copytree(FIXTURES / "malformed-toml", seeds / "broken-seed")
    proc = run_entry("aes.run", "experiment=simulated", f"domain.seeds={seeds}", f"hydra.run.dir={tmp_path / 'run'}")
    line = one_error(proc)
    assert proc.returncode == 2
    assert f"seed task {seeds / 'broken-seed'} cannot be loaded (task_toml.syntax)" in line
    assert "task.toml" in line and "domain.seeds=" in line
    assert not (tmp_path / "run" / "pool").exists()  # stopped before anything was seeded


@pytest.mark.parametrize("mode", ["validate", "eval", "rollout", "calibrate"])
def test_an_empty_tasks_dir_is_one_usage_error(tmp_path, mode):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no task here\n")
    proc = run_entry("aes.run", f"mode={mode}", f"tasks={tmp_path / 'empty'}", "solver=tiny",
                     f"hydra.run.dir={tmp_path / 'run'}")
    line = one_error(proc)
    assert proc.returncode == 2 and f"tasks={tmp_path / 'empty'}: no task there" in line and "task.toml" in line


@pytest.mark.parametrize("args,key", [(["tasks=/nonexistent"], "tasks"), (["k=3"], "k"),
                                       (["mode=validate", "assignments=2"], "assignments"),
                                       (["mode=generate", "attempts=2"], "attempts")])
def test_an_argument_the_mode_does_not_read_is_refused(tmp_path, args, key):
    proc = run_entry("aes.run", *args, f"hydra.run.dir={tmp_path / 'run'}")
    line = one_error(proc)
    assert proc.returncode == 2 and f"{key}= is not read by mode=" in line and "only by mode=" in line


@pytest.mark.docker
def test_validate_with_an_invalid_task_ends_in_a_verdict_summary(sandbox, tmp_path):
    from tests.conftest import FIXTURES

    proc = run_entry("aes.run", "mode=validate", f"tasks={FIXTURES / 'missing-solution'}",
                     f"hydra.run.dir={tmp_path / 'run'}")
    line = one_error(proc)
    assert proc.returncode == 1
    assert "mode=validate: 1 of 1 task(s) failed admission checks 1-4 (missing-solution)" in line
    assert str(tmp_path / "run" / "validation.json") in line and (tmp_path / "run" / "validation.json").is_file()
    assert "missing-solution" in proc.stdout  # the verdict table


def test_view_of_a_dir_that_is_not_a_run_is_a_usage_error(tmp_path):
    (tmp_path / "somewhere").mkdir()
    (tmp_path / "somewhere" / "notes.txt").write_text("hello\n")
    proc = run_entry("aes.cli", "view", str(tmp_path / "somewhere"))
    assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr
    assert f"{tmp_path / 'somewhere'} is not a run dir" in proc.stderr and "config.yaml" in proc.stderr
    assert not (tmp_path / "somewhere" / "viewer").exists()
