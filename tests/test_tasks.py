"""task.toml dialects, task loading and writing."""

from __future__ import annotations

import pytest

from aes.tasks import TaskConfigError, TaskLoadError, load_task, parse_task_toml, write_task
from aes.tasks.config import render_task_toml
from tests.conftest import SEEDS, make_task

CURRENT = """
schema_version = "1.4"
[task]
name = "aes/demo"
version = "2"
description = "d"
keywords = ["a"]
[metadata]
difficulty = "easy"
custom_field = 7
[agent]
timeout_sec = 300.0
[verifier]
timeout_sec = 60
env = { MODE = "strict" }
[environment]
build_timeout_sec = 900
cpus = 2
memory_mb = 4096
storage_mb = 10240
network_mode = "no-network"
workdir = "/app"
[extra_section]
kept = true
"""

LEGACY = """
version = "1.0"
[metadata]
author_name = "someone"
difficulty = "hard"
tags = ["x"]
[verifier]
timeout_sec = 120.0
[agent]
timeout_sec = 900.0
[environment]
build_timeout_sec = 600.0
cpus = 1
memory = "2G"
storage = "10G"
allow_internet = false
"""


def test_current_schema():
    spec, _ = parse_task_toml(CURRENT)
    assert (spec.name, spec.version, spec.keywords) == ("aes/demo", "2", ["a"])
    assert (spec.agent_timeout_sec, spec.verifier_timeout_sec, spec.build_timeout_sec) == (300, 60, 900)
    assert (spec.cpus, spec.memory_mb, spec.storage_mb) == (2, 4096, 10240)
    assert (spec.network_mode, spec.workdir, spec.verifier_env) == ("no-network", "/app", {"MODE": "strict"})
    assert spec.metadata["custom_field"] == 7


def test_legacy_dialect_maps_onto_the_same_semantics():
    spec, _ = parse_task_toml(LEGACY)
    assert spec.name is None
    assert (spec.memory_mb, spec.storage_mb, spec.network_mode) == (2048, 10240, "no-network")
    assert any("allow_internet" in note for note in spec.notes)
    assert parse_task_toml(LEGACY.replace("false", "true"))[0].network_mode == "public"


def test_network_mode_wins_over_allow_internet():
    text = '[environment]\nnetwork_mode = "public"\nallow_internet = false\n'
    assert parse_task_toml(text)[0].network_mode == "public"


@pytest.mark.parametrize("text,code", [
    ("[task\nname=", "task_toml.syntax"),
    ('[task]\nname = "no-org"\n', "task_toml.bad_name"),
    ("[agent]\ntimeout_sec = -1\n", "task_toml.bad_value"),
    ('[agent]\ntimeout_sec = "long"\n', "task_toml.bad_value"),
    ('[environment]\nmemory = "lots"\n', "task_toml.bad_value"),
    ('[environment]\nnetwork_mode = "host"\n', "task_toml.bad_value"),
    ('[environment]\nworkdir = "app"\n', "task_toml.bad_value"),
    ('[[steps]]\nname = "one"\n', "task_toml.unsupported"),
    ('[environment]\nos = "windows"\n', "task_toml.unsupported"),
    ("[environment]\ntpu = 1\n", "task_toml.unsupported"),
    ("[environment]\ngpus = -1\n", "task_toml.bad_value"),
    ('[environment]\ngpus = "all"\n', "task_toml.bad_value"),
    ('[verifier]\nenvironment_mode = "separate"\n', "task_toml.unsupported"),
    ('environment = "x"\n', "task_toml.bad_value"),
])
def test_uninterpretable_task_toml_is_rejected_with_a_code(text, code):
    with pytest.raises(TaskConfigError) as info:
        parse_task_toml(text)
    assert info.value.code == code


def test_tasks_declare_gpus_and_the_sandbox_asks_docker_for_what_the_host_has(monkeypatch):
    """[environment] gpus (Harbor's field): the containers get them where the host has them; on a host
    without GPUs the task still runs (its CPU path) and the sandbox says so."""
    from aes.sandbox import gpu

    assert parse_task_toml("[environment]\ngpus = 2\n")[0].gpus == 2
    assert parse_task_toml("")[0].gpus == 0
    assert "gpus = 2" in render_task_toml(parse_task_toml("[environment]\ngpus = 2\n")[0])
    assert gpu.plan(2, available=0).count == 0 and gpu.plan(2, available=0).device_requests() == []
    [request] = gpu.plan(1, available=4).device_requests()
    assert request.count == 1 and request.capabilities == [["gpu"]]
    assert gpu.plan(4, available=2).count == 2
    assert gpu.plan(0, available=8).count == 0


def test_load_reports_missing_parts(tmp_path):
    path = make_task(tmp_path)
    (path / "tests" / "test.sh").unlink()
    with pytest.raises(TaskLoadError, match="tests/test.sh") as info:
        load_task(path)
    assert info.value.code == "layout.missing_file"


def test_non_utf8_instruction_is_rejected(tmp_path):
    path = make_task(tmp_path)
    (path / "instruction.md").write_bytes(b"\xff\xfe bad")
    with pytest.raises(TaskLoadError) as info:
        load_task(path)
    assert info.value.code == "layout.not_utf8"


def test_write_keeps_unknown_keys_and_comments(tmp_path):
    path = make_task(tmp_path, toml="# keep me\n" + CURRENT)
    task = load_task(path)
    task.spec.agent_timeout_sec = 1200
    copy = write_task(task, tmp_path / "copy")
    text = (copy.path / "task.toml").read_text()
    assert "# keep me" in text and "[extra_section]" in text and "custom_field = 7" in text
    assert copy.spec.agent_timeout_sec == 1200 and copy.spec.network_mode == "no-network"


def test_write_normalises_legacy_fields(tmp_path):
    task = load_task(make_task(tmp_path, toml=LEGACY))
    copy = write_task(task, tmp_path / "copy")
    text = (copy.path / "task.toml").read_text()
    assert "memory_mb = 2048" in text and "allow_internet" not in text and 'memory = "2G"' not in text
    assert copy.spec.network_mode == "no-network"


def test_seed_tasks_load():
    seeds = sorted(p for p in SEEDS.iterdir() if p.is_dir())
    assert seeds
    for path in seeds:
        task = load_task(path)
        assert task.name == f"aes/{path.name}"


def _sparse(path, size):
    with open(path, "wb") as fh:
        fh.truncate(size)


def test_oversized_instruction_is_rejected_with_its_size_and_the_key(tmp_path):
    path = make_task(tmp_path)
    _sparse(path / "instruction.md", 100 << 20)
    with pytest.raises(TaskLoadError) as info:
        load_task(path)
    assert info.value.code == "layout.instruction_too_large"
    assert "100.0 MiB" in str(info.value) and "256.0 KiB" in str(info.value)
    assert "sandbox.max_instruction_kb" in str(info.value)


def test_instruction_limit_is_an_argument(tmp_path):
    path = make_task(tmp_path, instruction="x" * 3000 + "\n")
    with pytest.raises(TaskLoadError) as info:
        load_task(path, max_instruction_kb=2)
    assert info.value.code == "layout.instruction_too_large"
    assert load_task(path, max_instruction_kb=4).instruction.startswith("xxx")
    assert load_task(path).instruction.startswith("xxx")


def test_default_instruction_limit_is_the_schemas():
    from aes.config import SandboxConfig
    from aes.tasks.task import DEFAULT_MAX_INSTRUCTION_KB

    assert DEFAULT_MAX_INSTRUCTION_KB == SandboxConfig().max_instruction_kb


def test_oversized_task_toml_is_rejected(tmp_path):
    path = make_task(tmp_path)
    with open(path / "task.toml", "a") as fh:
        fh.write("# padding\n" * 40_000)
    with pytest.raises(TaskLoadError) as info:
        load_task(path)
    assert info.value.code == "layout.task_toml_too_large"
    assert load_task(path, max_toml_kb=1024).name == "test/t"


MEMORY_PROBE = r"""
import json, resource, sys
from pathlib import Path

from aes.admission.review import render_task
from aes.pool import content_hash
from aes.proposer.files import render_files
from aes.sandbox.images import ImageBuilder
from aes.tasks import TaskLoadError, check_task, load_task

path = Path(sys.argv[1])
def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
before = peak_mb()
try:
    load_task(path)
    code = None
except TaskLoadError as exc:
    code = exc.code
(path / "instruction.md").write_text("Write 42 to /app/answer.txt.\n")
task = load_task(path)
codes = [r.code for r in check_task(task)]
render_task(path, 6000)
render_files(path, 100_000)
content_hash(path)
context, _ = ImageBuilder._context(ImageBuilder.__new__(ImageBuilder), task, "FROM python:3.12-slim\n")
context.close()
print(json.dumps({"before_mb": before, "growth_mb": peak_mb() - before, "load": code, "codes": codes}))
"""


def test_huge_files_do_not_take_memory(tmp_path):
    """A 1 GiB sparse file in tests/, a 100 MB instruction.md and a 100 MiB context file: loading,
    static checks, review rendering, the content hash and the build context stay within ~50 MB."""
    import json
    import subprocess
    import sys

    from tests.conftest import REPO

    path = make_task(tmp_path)
    _sparse(path / "tests" / "big.bin", 1 << 30)
    _sparse(path / "instruction.md", 100 * 10**6)
    _sparse(path / "environment" / "blob.bin", 100 << 20)
    out = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(path)], capture_output=True, text=True,
                         cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["load"] == "layout.instruction_too_large"
    assert result["codes"] == ["static.tests_too_large"]
    assert result["growth_mb"] < 50, result
