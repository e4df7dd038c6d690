"""Checks the v2 files in /app/configs/v2 and runs /app/migrate.py on v1 files it has not seen;
each test is one part of the reward. expected.json follows the platform team's answers.

The agent's script never runs in this process, which decides the reward, nor as root: it runs as
an unprivileged user (tests/untrusted.py, a byte copy of aes/domains/kit/untrusted.py) on a copy
of the unseen files, with this folder made unreadable to it first; only its output files are read."""

import json
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from untrusted import readable, run_as_untrusted  # noqa: E402

EXPECTED = json.loads((HERE / "expected.json").read_text())
V2 = Path("/app/configs/v2")


@pytest.fixture(scope="module")
def migrated():
    docs = {}
    for name in EXPECTED["app"]:
        path = V2 / f"{name}.json"
        docs[name] = json.loads(path.read_text()) if path.is_file() else None
    return docs


def test_every_file_converted(migrated):
    assert sorted(p.stem for p in V2.glob("*.json")) == sorted(EXPECTED["app"])
    assert all(isinstance(doc, dict) and doc.get("version") == 2 for doc in migrated.values())


def test_server_settings(migrated):
    assert {n: (d or {}).get("server") for n, d in migrated.items()} == \
        {n: d["server"] for n, d in EXPECTED["app"].items()}


def test_database_settings(migrated):
    assert {n: (d or {}).get("database") for n, d in migrated.items()} == \
        {n: d["database"] for n, d in EXPECTED["app"].items()}


def test_export_paths(migrated):
    assert migrated and all(d is not None for d in migrated.values())
    assert {n: d.get("exports") for n, d in migrated.items()} == \
        {n: d.get("exports") for n, d in EXPECTED["app"].items()}


def test_settings_outside_the_format(migrated):
    assert migrated and all(d is not None for d in migrated.values())
    assert {n: d.get("extra") for n, d in migrated.items()} == \
        {n: d.get("extra") for n, d in EXPECTED["app"].items()}


def test_whole_documents(migrated):
    assert migrated == EXPECTED["app"]


def test_migrate_script_on_other_services():
    readable("/app")
    work = tempfile.mkdtemp(prefix="migrate-")
    try:
        shutil.copytree(HERE / "v1", Path(work) / "v1")
        result = run_as_untrusted(["python3", "/app/migrate.py", "v1", "v2"], work, timeout=60, private=[str(HERE)])
        assert result.returncode == 0, result.stdout[-2000:]
        got = {p.stem: json.loads(p.read_text()) for p in (Path(work) / "v2").glob("*.json")}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert got == EXPECTED["hidden"]
