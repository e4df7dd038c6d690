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
