"""Checks the saved workbook (openpyxl: the formulas as written). The values are computed here from
the formulas (tests/recalc.py), never read from what the file stored with them, and again after
moving the inputs: a pasted value or a constant formula does not follow them. Every test first
requires that the workbook holds a formula in F2 (the untouched workbook has none), so doing
nothing scores 0."""

import os
import sys

import pytest
from openpyxl import load_workbook

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recalc import evaluate  # noqa: E402

BOOK = "/app/stock-audit.xlsx"
INPUTS = [
    ("BX-100", "Shipping box, small", 420, 408, 0.35),
    ("BX-200", "Shipping box, large", 185, 190, 0.80),
    ("TP-010", "Packing tape roll", 96, 91, 2.40),
    ("LB-550", "Thermal label pack", 60, 60, 6.75),
    ("WR-300", "Bubble wrap roll", 24, 21, 18.50),
    ("PL-900", "Pallet wrap", 12, 13, 22.00),
]


@pytest.fixture(scope="module")
def sheets():
    formulas = load_workbook(BOOK)["Audit"]
    assert str(formulas["F2"].value or "").startswith("="), "the workbook was not saved with a formula in F2"
    return formulas, None


def _computes(ws, cell, want, changes=None):
    assert str(ws[cell].value).startswith("="), (cell, ws[cell].value)
    assert evaluate(ws, cell, changes) == pytest.approx(want), (cell, ws[cell].value, changes)


def test_variance_formulas(sheets):
    ws, _ = sheets
    for row, (_, _, on_hand, counted, _) in enumerate(INPUTS, start=2):
        _computes(ws, f"F{row}", counted - on_hand)
        _computes(ws, f"F{row}", counted + 7 - on_hand, {f"D{row}": counted + 7})
        _computes(ws, f"F{row}", counted - on_hand - 7, {f"C{row}": on_hand + 7})


def test_variance_value_formulas(sheets):
    ws, _ = sheets
    for row, (_, _, on_hand, counted, cost) in enumerate(INPUTS, start=2):
        _computes(ws, f"G{row}", (counted - on_hand) * cost)
        _computes(ws, f"G{row}", (counted - on_hand) * (cost + 1.5), {f"E{row}": cost + 1.5})
        _computes(ws, f"G{row}", (counted + 3 - on_hand) * cost, {f"D{row}": counted + 3})


def test_total_is_a_sum_formula(sheets):
    ws, _ = sheets
    total = sum((c - h) * u for _, _, h, c, u in INPUTS)
    _computes(ws, "G9", total)
    for row in (2, 7):  # the first and the last item count
        _, _, on_hand, counted, cost = INPUTS[row - 2]
        _computes(ws, "G9", total + 10 * cost, {f"D{row}": counted + 10})


def test_bookkeeping_inputs_are_kept(sheets):
    formulas, _ = sheets
    for row, expected in enumerate(INPUTS, start=2):
        got = tuple(formulas.cell(row, col).value for col in range(1, 6))
        assert got[:2] == expected[:2] and got[2:] == pytest.approx(expected[2:]), (row, got)
    assert [c.value for c in formulas[1]][:7] == ["SKU", "Item", "On hand", "Counted", "Unit cost", "Variance",
                                                  "Variance value"]
    assert formulas["A9"].value == "Total variance value"
