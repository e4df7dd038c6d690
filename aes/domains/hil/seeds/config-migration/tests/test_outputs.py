"""Checks the v2 files in /app/configs/v2 and runs /app/migrate.py on v1 files it has not seen;
each test is one part of the reward. expected.json follows the platform team's answers."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
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


def test_migrate_script_on_other_services(tmp_path):
    result = subprocess.run([sys.executable, "/app/migrate.py", str(HERE / "v1"), str(tmp_path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    got = {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    assert got == EXPECTED["hidden"]
