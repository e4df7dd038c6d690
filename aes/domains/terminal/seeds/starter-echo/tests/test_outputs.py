"""Checks /app/hello.txt, from existence to exact content."""

from pathlib import Path

HELLO = Path("/app/hello.txt")


def test_file_exists():
    assert HELLO.is_file()


def test_file_mentions_hello():
    assert "hello" in HELLO.read_text().lower()


def test_file_is_exactly_hello_and_newline():
    assert HELLO.read_text() == "hello\n"
