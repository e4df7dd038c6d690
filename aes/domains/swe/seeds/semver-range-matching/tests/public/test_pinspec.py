"""Regression tests of pinspec."""

import pytest

from pinspec import compare, max_satisfying, parse_version, satisfies


def test_parse_version():
    assert parse_version(" 1.4.2 ") == (1, 4, 2)
    for bad in ("1.4", "v1.4.2", "1.04.2", "1.4.2.0", ""):
        with pytest.raises(ValueError):
            parse_version(bad)


def test_compare_simple():
    assert compare("1.2.3", "1.2.3") == 0
    assert compare("1.2.3", "1.2.4") == -1
    assert compare("2.0.0", "1.9.9") == 1


def test_exact_and_comparison_clauses():
    assert satisfies("1.2.3", "==1.2.3") and satisfies("1.2.3", "1.2.3")
    assert satisfies("1.5.0", ">=1.2.0, <2.0.0")
    assert not satisfies("2.0.0", ">=1.2.0, <2.0.0")


def test_caret_and_tilde():
    assert satisfies("1.4.2", "^1.2.0")
    assert not satisfies("2.0.0", "^1.2.0")
    assert satisfies("1.2.9", "~1.2.3")
    assert not satisfies("1.3.0", "~1.2.3")


def test_max_satisfying():
    assert max_satisfying(["1.2.0", "1.4.2", "2.0.0"], "^1.2.0") == "1.4.2"
    assert max_satisfying(["0.9.0"], "^1.2.0") is None


def test_caret_accepts_two_digit_minor():
    """Issue #17: ^1.2.3 rejected 1.10.0."""
    assert satisfies("1.10.0", "^1.2.3")
