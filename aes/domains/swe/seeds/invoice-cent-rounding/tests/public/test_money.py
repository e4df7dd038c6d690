"""Regression tests of ledgerkit's money arithmetic."""

import pytest

from ledgerkit import invoice_totals, line_total, split_evenly


def test_line_total_simple():
    assert line_total("3", "19.99") == "59.97"
    assert line_total(2, "0.50") == "1.00"


def test_invoice_totals_simple():
    assert invoice_totals([("2", "10.00"), ("1", "5.50")], "0.2") == {
        "subtotal": "25.50", "tax": "5.10", "total": "30.60"}


def test_split_evenly():
    assert split_evenly("10.00", 3) == ["3.34", "3.33", "3.33"]


def test_refuses_floats_and_garbage():
    with pytest.raises(TypeError):
        line_total(1.5, "2.00")
    with pytest.raises(ValueError):
        line_total("abc", "2.00")


def test_half_cent_rounds_up():
    """Issue #58: 1 x 1.005 was billed as 1.00."""
    assert line_total("1", "1.005") == "1.01"
