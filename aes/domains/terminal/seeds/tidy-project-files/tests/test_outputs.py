"""Checks the tidied /app/project; each test is one part of the reward."""

import hashlib
import os
import tarfile
from pathlib import Path

PROJECT = Path("/app/project")
ARCHIVE = Path("/app/docs.tar.gz")
DOCS = {
    "docs/api/reference.md": "c8660187eaf94391966bbd59038b4b8705802b78bb9b7102f88973f3c5cb18e4",
    "docs/intro.md": "e7d313a62bdc0202cf43391b7f967d7741f3acf96bcd122bcd448c6013332549",
    "docs/usage.md": "a9bde31e6d591bfe07921a5cc32ed2bef727ec06b70bca654d6ba83af1b4cebc",
}
KEPT = ["README.md", "notes.txt", "src/main.py", "data/small.csv", "data/telemetry.csv",
        "logs/old.log", "logs/run.log", "docs/intro.md"]


def executable(rel):
    return os.stat(PROJECT / rel).st_mode & 0o100


def test_top_level_scripts_executable():
    assert executable("scripts/build.sh") and executable("scripts/deploy.sh")


def test_nested_script_executable():
    assert executable("scripts/lib/helpers.sh")


def test_tmp_files_deleted_and_others_kept():
    left = [p for p in PROJECT.rglob("*") if p.name.endswith(".tmp")]
    assert left == []
    assert all((PROJECT / rel).is_file() for rel in KEPT)


def test_archive_is_gzip_tar():
    assert ARCHIVE.read_bytes()[:2] == b"\x1f\x8b"
    with tarfile.open(ARCHIVE, "r:gz") as tar:
        assert tar.getmembers()


def test_archive_contents():
    found = {}
    with tarfile.open(ARCHIVE, "r:gz") as tar:
        for member in tar.getmembers():
            if member.isfile():
                name = member.name[2:] if member.name.startswith("./") else member.name
                found[name] = hashlib.sha256(tar.extractfile(member).read()).hexdigest()
    assert found == DOCS


def test_large_files_list():
    lines = [l.strip() for l in Path("/app/large_files.txt").read_text().splitlines() if l.strip()]
    assert lines == ["data/telemetry.csv", "docs/api/reference.md", "logs/run.log"]
