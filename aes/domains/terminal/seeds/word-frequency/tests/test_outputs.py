"""Checks the answer files in /app/answers; each test is one part of the reward."""

from pathlib import Path

ANSWERS = Path("/app/answers")
WORDS = ["badger", "fox", "hare", "heron", "lynx", "marten", "newt", "otter", "owl", "stoat", "vole", "wren"]


def answer(name):
    return (ANSWERS / name).read_text().strip()


def test_answers_directory_exists():
    assert ANSWERS.is_dir()


def test_line_count():
    assert answer("lines.txt") == "71"


def test_distinct_count():
    assert answer("distinct.txt") == "12"


def test_top_word():
    assert answer("top.txt") == "fox"


def test_top_word_count():
    assert answer("top_count.txt") == "14"


def test_sorted_distinct_words():
    lines = [line.strip() for line in (ANSWERS / "sorted.txt").read_text().splitlines() if line.strip()]
    assert lines == WORDS
