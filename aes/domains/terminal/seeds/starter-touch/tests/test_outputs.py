"""Checks that /app/a.txt and /app/b.txt exist and are empty files."""

from pathlib import Path


def test_a_exists():
    assert Path("/app/a.txt").is_file()


def test_b_exists():
    assert Path("/app/b.txt").is_file()


def test_both_are_empty():
    assert Path("/app/a.txt").stat().st_size == 0 and Path("/app/b.txt").stat().st_size == 0
