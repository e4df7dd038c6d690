"""Only the substance reaches 0.5 (issue 25, item 1): each seed's own reward script (the heredoc of its
tests/test.sh), fed junit reports, in the domains whose tests split the substance from the
bookkeeping (``test_bookkeeping_*``: closed, untouched, already right, kept as written). No Docker."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOMAINS = Path(__file__).resolve().parents[1] / "aes" / "domains"
SEEDS = sorted(p for d in ("tool_calling", "browser", "desktop") for p in (DOMAINS / d / "seeds").iterdir()
               if (p / "tests" / "test.sh").is_file())


def _tests(seed: Path) -> list[str]:
    tree = ast.parse((seed / "tests" / "test_outputs.py").read_text())
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]


def _reward(seed: Path, tmp_path: Path, passed: set[str]) -> float:
    script = re.search(r"<<'PY'\n(.*?)\nPY\n", (seed / "tests" / "test.sh").read_text(), re.S).group(1)
    script = script.replace("/logs/verifier/", f"{tmp_path}/")
    body = "".join(f'<testcase classname="test_outputs" name="{name}">' + ("" if name in passed else "<failure/>")
                   + "</testcase>" for name in _tests(seed))
    (tmp_path / "junit.xml").write_text(f'<testsuites><testsuite name="pytest">{body}</testsuite></testsuites>')
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, cwd=tmp_path)
    return float((tmp_path / "reward.txt").read_text())


def test_every_such_seed_has_both_kinds_of_test():
    assert len(SEEDS) == 12
    for seed in SEEDS:
        names = _tests(seed)
        assert any(n.startswith("test_bookkeeping_") for n in names), seed.name
        assert any(not n.startswith("test_bookkeeping_") for n in names), seed.name


@pytest.mark.parametrize("seed", SEEDS, ids=lambda p: f"{p.parents[1].name}/{p.name}")
def test_the_bookkeeping_pays_only_once_the_substance_is_right(seed, tmp_path):
    names = _tests(seed)
    books = {n for n in names if n.startswith("test_bookkeeping_")}
    substance = [n for n in names if n not in books]
    assert _reward(seed, tmp_path, set(names)) == 1.0
    assert _reward(seed, tmp_path, set()) == 0.0
    # every bookkeeping test and all but one substance test: the bookkeeping earns nothing yet (desktop:
    # the edits earn 0.8 only once all are right, 0.4 times their share before, so one left out is < 0.5)
    almost = _reward(seed, tmp_path, books | set(substance[1:]))
    partial = 0.4 if seed.parents[1].name == "desktop" else 0.8
    assert almost == pytest.approx(partial * (len(substance) - 1) / len(substance), abs=1e-4)
    assert seed.parents[1].name != "desktop" or almost < 0.5
    # the bookkeeping alone (closed, untouched, already right) and one substance test: under 0.5
    assert _reward(seed, tmp_path, books | set(substance[:1])) < 0.5
    # all of the substance, one bookkeeping test failing: 0.8 plus the rest of the bookkeeping
    short = _reward(seed, tmp_path, set(names) - {sorted(books)[0]})
    assert short == pytest.approx(0.8 + 0.2 * (len(books) - 1) / len(books), abs=1e-4)
