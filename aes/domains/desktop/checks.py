"""Admission checks of the desktop domain, run after checks 1-4 and the reset check: the wrong-work
probe (``desktop.near_miss_rewarded``).

A careless attempt at a document task makes most of the edits and misses one: the header left
plain, the date not filled, a total typed in. The probe derives that attempt from the reference's
own result without knowing what the edits are: the reference runs in a fresh environment as the
agent would, and the task's own tests score its document with one test of the edits (the first
test in ``tests/test_outputs.py`` not named ``test_bookkeeping_*``) made to fail, through a hook
added to the copy's ``tests/conftest.py``. Tests that give that near miss 0.5 or more pay for a
document with an edit left out, and the task is rejected; the task format's ``test.sh`` gives the
edits their 0.8 only once all of them pass (0.4 times their share before), so it earns under 0.4.

The probe cannot tell (and gives no reason) when the tests name no test of the edits, or when the
reference's run ends without a reward (the infrastructure: checks 1-4 already saw it pass).
"""

from __future__ import annotations

import ast
import logging
import shutil
import tempfile
from pathlib import Path

from aes.sandbox import OracleAgent
from aes.tasks import Reason, load_task

log = logging.getLogger(__name__)

NEAR_MISS_MAX = 0.5
"""A near miss earning this much or more is rejected."""

HOOK = '''

# -- added by aes's near-miss probe (aes/domains/desktop/checks.py): this edit counts as missed --
import pytest as _aes_pytest


@_aes_pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    if item.name.split("[")[0] == {name!r}:
        _aes_pytest.fail("aes near-miss probe: this edit counts as not made")
'''


def edit_tests(tests_dir: Path) -> list[str]:
    """The tests of the edits, in file order: every ``test_*`` function of ``test_outputs.py`` but
    ``test_bookkeeping_*`` (empty when the file is missing or does not parse)."""
    try:
        tree = ast.parse((tests_dir / "test_outputs.py").read_text())
    except (OSError, SyntaxError, ValueError):
        return []
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.name.startswith("test_") and not n.name.startswith("test_bookkeeping_")]


def near_miss(task_dir: Path, runner, image: str):
    """``(the edit test made to fail, the trial)`` of the reference scored as a near miss, or None when
    the tests name no test of the edits."""
    edits = edit_tests(task_dir / "tests")
    if not edits:
        return None
    missed = edits[0]
    with tempfile.TemporaryDirectory(prefix="aes-near-miss-") as tmp:
        copy = Path(tmp) / task_dir.name
        shutil.copytree(task_dir, copy, symlinks=True)
        conftest = copy / "tests" / "conftest.py"
        conftest.write_text((conftest.read_text() if conftest.is_file() else "") + HOOK.format(name=missed))
        return missed, runner.run(load_task(copy), OracleAgent(), image)


def checks(task_dir, runner, image: str) -> list[Reason]:
    """The desktop domain's reasons to reject the task at ``task_dir`` (built as ``image``)."""
    probed = near_miss(Path(task_dir), runner, image)
    if probed is None:
        return []
    missed, trial = probed
    if trial.reward is None:
        log.warning("desktop near-miss probe on %s: no reward (%s: %s); it cannot tell", Path(task_dir).name,
                    trial.outcome.value, trial.detail)
        return []
    if trial.reward >= NEAR_MISS_MAX:
        return [Reason("desktop.near_miss_rewarded",
                       f"its tests pay for a document with an edit left out: the reference's document with "
                       f"{missed} failing (every other test as the reference earns it) earns {trial.reward:.2f} "
                       f"(at least {NEAR_MISS_MAX}); give the edits their 0.8 only once all of their tests pass "
                       "(0.4 times their share before) and the test_bookkeeping_* tests their 0.2 only then, as "
                       "the task format's test.sh does")]
    return []
