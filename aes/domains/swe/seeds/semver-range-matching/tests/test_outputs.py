"""Private tests of the pinspec fix: numeric ordering of every component, the caret rule for
0.x versions, max_satisfying, the unchanged API and validation.
Each test is one part of the reward, which tests/test.sh gives only once the repository's public
tests pass and test_gate_* (the issue's rule, on cases the public tests do not show) passes: both fail on the repository as built, so
doing nothing earns 0. The package runs in a child process as another user (tests/untrusted.py)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from untrusted import Untrusted, raises  # noqa: E402

REPO = "/app/repo"




@pytest.fixture(scope="module")
def child():
    """The package, imported in a child process as an unprivileged user (tests/untrusted.py):
    its code never runs in this process, which decides the reward."""
    with Untrusted([REPO]) as untrusted:
        yield untrusted


@pytest.fixture(scope="module")
def ps(child):
    return child.module("pinspec")


def test_gate_the_issue_is_fixed(ps):
    """Issue #17's rule on its own case and on cases the public tests do not show (earns nothing
    itself: while it fails the reward is 0, so special-casing the issue's example earns nothing)."""
    assert ps.satisfies("1.10.0", "^1.2.3")
    assert ps.satisfies("2.10.1", "^2.9.0")
    assert ps.satisfies("1.2.10", "~1.2.9")
    assert ps.compare("1.10.0", "1.9.0") == 1


def test_components_compare_as_numbers(ps):
    assert ps.compare("1.10.0", "1.9.0") == 1
    assert ps.compare("10.0.0", "9.99.99") == 1
    assert ps.compare("1.2.10", "1.2.9") == 1
    assert ps.compare("1.2.9", "1.2.10") == -1
    assert ps.compare(" 2.0.0", "2.0.0 ") == 0


def test_comparison_clauses_with_multi_digit_components(ps):
    assert ps.satisfies("1.10.0", ">=1.9.0")
    assert not ps.satisfies("1.10.0", "<1.9.0")
    assert ps.satisfies("2.0.10", ">2.0.9, <2.1.0")
    assert ps.satisfies("1.12.0", "~1.12.0") and not ps.satisfies("1.13.0", "~1.12.0")
    assert ps.satisfies("3.0.0", "^2.9.9") is False
    assert ps.satisfies("2.10.0", "^2.9.9")


def test_caret_on_zero_major(ps):
    assert ps.satisfies("0.2.9", "^0.2.3")
    assert not ps.satisfies("0.3.0", "^0.2.3")
    assert not ps.satisfies("0.9.1", "^0.2.3")
    assert not ps.satisfies("0.2.2", "^0.2.3")
    assert ps.satisfies("0.10.5", "^0.10.0") and not ps.satisfies("0.11.0", "^0.10.0")


def test_caret_on_zero_major_and_minor(ps):
    assert ps.satisfies("0.0.3", "^0.0.3")
    assert not ps.satisfies("0.0.4", "^0.0.3")
    assert not ps.satisfies("0.1.0", "^0.0.3")


def test_max_satisfying_picks_the_highest(ps):
    assert ps.max_satisfying(["1.9.0", "1.10.0", "1.2.0"], ">=1.0.0") == "1.10.0"
    assert ps.max_satisfying(["0.2.3", "0.10.0", "0.9.1", "0.2.11"], "^0.2.0") == "0.2.11"
    assert ps.max_satisfying(["2.0.0", "1.99.0"], "^1.0.0") == "1.99.0"
    assert ps.max_satisfying([], "^1.0.0") is None


def test_api_and_validation_unchanged(ps):
    assert set(ps.value("__all__")) >= {"compare", "max_satisfying", "parse_version", "satisfies"}
    assert ps.parse_version("12.0.7") == (12, 0, 7)
    for version, spec in (("1.2", "^1.0.0"), ("1.2.3", "^1.2"), ("1.2.3", ""), ("1.2.3", ">>1.0.0"),
                          ("x.y.z", ">=1.0.0")):
        assert raises(ValueError, ps.satisfies, version, spec)
    assert raises(ValueError, ps.max_satisfying, ["1.0.0", "bad"], ">=0.0.1")
