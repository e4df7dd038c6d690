"""Private tests of the ledgerkit fix: rounding half away from zero (FP-7) for lines, credit
notes, tax and very large amounts, exact splits, the unchanged API and validation.
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
def lk(child):
    return child.module("ledgerkit")


def test_gate_the_issue_is_fixed(lk):
    """Issue #58's rule on its own case and on cases the public tests do not show (earns nothing
    itself: while it fails the reward is 0, so special-casing the issue's example earns nothing)."""
    assert lk.line_total("1", "1.005") == "1.01"
    assert lk.line_total("1", "2.675") == "2.68"
    assert lk.line_total("-1", "1.005") == "-1.01"
    assert lk.line_total("1", "0.125") == "0.13"


def test_line_totals_round_half_up(lk):
    assert lk.line_total("1", "1.005") == "1.01"
    assert lk.line_total("1", "2.675") == "2.68"
    assert lk.line_total("3", "0.335") == "1.01"
    assert lk.line_total("7", "0.145") == "1.02"
    assert lk.line_total(4, "1.0025") == "4.01"


def test_credit_lines_round_away_from_zero(lk):
    assert lk.line_total("-1", "1.005") == "-1.01"
    assert lk.line_total("1", "-2.675") == "-2.68"
    assert lk.line_total("-2", "0.0625") == "-0.13"


def test_tax_rounds_half_up(lk):
    assert lk.invoice_totals([("1", "10.10")], "0.25") == {"subtotal": "10.10", "tax": "2.53", "total": "12.63"}
    assert lk.invoice_totals([("1", "1.005"), ("1", "2.675"), ("-1", "0.125")], "0.075") == {
        "subtotal": "3.56", "tax": "0.27", "total": "3.83"}


def test_large_amounts_stay_exact(lk):
    assert lk.line_total("1", "12345678901234.565") == "12345678901234.57"
    assert lk.line_total("1000", "98765432109.87654") == "98765432109876.54"
    assert lk.invoice_totals([("1", "9007199254740993.01")], "0") == {
        "subtotal": "9007199254740993.01", "tax": "0.00", "total": "9007199254740993.01"}


def test_split_evenly_is_exact(lk):
    assert lk.split_evenly("0.29", 1) == ["0.29"]
    assert lk.split_evenly("1.13", 3) == ["0.38", "0.38", "0.37"]
    assert lk.split_evenly("123456789012345.67", 2) == ["61728394506172.84", "61728394506172.83"]
    assert lk.split_evenly("10.00", 3) == ["3.34", "3.33", "3.33"]


def test_api_and_validation_unchanged(lk):
    assert set(lk.value("__all__")) >= {"invoice_totals", "line_total", "split_evenly"}
    assert raises(TypeError, lk.line_total, "1", 2.5)
    assert raises(TypeError, lk.invoice_totals, [("1", "2.00")], 0.2)
    for bad in ("abc", "", "1.2.3"):
        assert raises(ValueError, lk.line_total, bad, "1.00")
    assert raises(ValueError, lk.split_evenly, "1.00", 0)
    assert lk.line_total("2", "0.50") == "1.00"
