"""Checks /app/output; each test is one part of the reward."""

import stat
from pathlib import Path

OUT = Path("/app/output")
GREETING = OUT / "greeting.txt"
DONE = OUT / "DONE"


def test_output_directory_exists():
    assert OUT.is_dir()


def test_greeting_file_exists():
    assert GREETING.is_file()


def test_greeting_words():
    assert " ".join(GREETING.read_text().split()).lower() == "hello world"


def test_greeting_exact_content():
    assert GREETING.read_bytes() == b"hello world\n"


def test_greeting_permissions():
    assert stat.S_IMODE(GREETING.stat().st_mode) == 0o644


def test_done_marker_is_empty_file():
    assert DONE.is_file() and DONE.stat().st_size == 0
