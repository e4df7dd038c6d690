"""Why an attempt fell short, named by the first step it did not reach.

A label is read from the verifier's output (pytest's, as the tests print it). The first failed
test is often not the step that was missed: when no output file exists every test errors (or
fails) on opening it, and the first of them names only what it would have checked. So the label
goes down the steps in order and stops at the first one missing:

1. the trial itself ended without a verdict (``trial verifier_timeout``);
2. no test passed and they share one cause: a file they open does not exist (``no output file
   /app/out.csv``), a module of the agent cannot be imported (``module report not importable``),
   the output is not parseable (``output not valid JSON``);
3. no test passed for other reasons: ``no test passed (first: test_x)``;
4. some passed: the first failed test in the order pytest ran them (``test_x failed``).

The agent's end reason (``done``, ``max_turns``, ``timeout``) is appended, so a label also tells
whether the attempt stopped itself or was stopped.
"""

from __future__ import annotations

import re

PASS = 1.0
_SUMMARY_LINE = re.compile(r"^(FAILED|ERROR) (?:\S+::)?(\S+?)(?: - (.*))?\s*$", re.MULTILINE)
_COUNTS = re.compile(r"(\d+) (passed|failed|errors?)\b")
_MISSING_FILE = re.compile(r"(?:FileNotFoundError|No such file or directory)[^'\"\n]*['\"]([^'\"\n]+)['\"]")
_NO_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): (?:No module named|cannot import name) '([^']+)'")
_UNPARSEABLE = (("JSONDecodeError", "output not valid JSON"), ("csv.Error", "output not valid CSV"),
                ("UnicodeDecodeError", "output not valid text"), ("sqlite3.DatabaseError", "output not a valid database"))


def failed_tests(verifier_output: str) -> list[str]:
    """Names of failing or erroring tests in pytest's short summary, in the order pytest ran them."""
    return [name for _, name, _ in _SUMMARY_LINE.findall(verifier_output or "")]


def _passed(verifier_output: str) -> int | None:
    """Tests pytest counted as passed in its last tally line (None when there is no tally)."""
    tallies = [line for line in (verifier_output or "").splitlines() if _COUNTS.search(line) and " in " in line]
    if not tallies:
        return None
    return sum(int(n) for n, what in _COUNTS.findall(tallies[-1]) if what == "passed")


def _common_cause(verifier_output: str) -> str | None:
    """What made every test fail at once, where the output shows one cause."""
    missing = _MISSING_FILE.findall(verifier_output)
    if missing:
        return f"no output file {missing[0]}"
    module = _NO_MODULE.findall(verifier_output)
    if module:
        return f"module {module[0]} not importable"
    for marker, label in _UNPARSEABLE:
        if marker in verifier_output:
            return label
    return None


def failure_label(reward: float | None, outcome: str, end_reason: str | None, verifier_output: str) -> str | None:
    """A short label of the first step an attempt did not reach; None when it scored full reward."""
    if reward is not None and reward >= PASS:
        return None
    if outcome not in ("ok", "agent_timeout"):
        return f"trial {outcome}"
    text = verifier_output or ""
    failures = _SUMMARY_LINE.findall(text)
    passed = _passed(text)
    if failures and passed == 0:
        cause = _common_cause(text)
        what = cause or f"no test passed (first: {failures[0][1]})"
    elif failures:
        what = f"{failures[0][1]} failed"
    elif reward == 0.0 and _common_cause(text):
        what = _common_cause(text)
    else:
        what = "tests failed"
    return f"{what} (agent: {end_reason})" if end_reason else what
