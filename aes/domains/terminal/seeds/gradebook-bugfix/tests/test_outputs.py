"""Calls the functions of /app/gradebook.py; each test is one part of the reward."""

import importlib.util
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def gb():
    spec = importlib.util.spec_from_file_location("gradebook", "/app/gradebook.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parse_scores(gb):
    text = "# header\n  ann , 70\n\nben,85\n   # note\nchloe,  100 \n"
    assert gb.parse_scores(text) == [("ann", 70), ("ben", 85), ("chloe", 100)]


def test_average(gb):
    assert gb.average([1, 2]) == pytest.approx(1.5)
    assert gb.average([90, 85, 70]) == pytest.approx(81.6666667)
    assert gb.average([]) == 0.0


def test_median(gb):
    assert gb.median([5, 1, 3]) == 3.0
    assert gb.median([4, 1, 3, 2]) == 2.5
    assert gb.median([]) == 0.0


def test_letter_grade_boundaries(gb):
    cases = {100: "A", 90: "A", 89: "B", 80: "B", 79: "C", 70: "C", 69: "D", 60: "D", 59: "F", 0: "F"}
    assert {score: gb.letter_grade(score) for score in cases} == cases


def test_top_n_breaks_ties_by_name(gb):
    pairs = [("bob", 80), ("amy", 80), ("cal", 95), ("dan", 70)]
    assert gb.top_n(pairs, 3) == [("cal", 95), ("amy", 80), ("bob", 80)]


def test_histogram_has_all_letters(gb):
    assert gb.histogram([("a", 95), ("b", 85), ("c", 50)]) == {"A": 1, "B": 1, "C": 0, "D": 0, "F": 1}


def test_report_script_runs():
    result = subprocess.run([sys.executable, "/app/report.py"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0
    assert "students: 7" in result.stdout
    assert "average: 76.57" in result.stdout
    assert "median: 80.0" in result.stdout
