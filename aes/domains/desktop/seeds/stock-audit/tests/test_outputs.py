"""Checks the saved workbook (openpyxl: the formulas as written, and the values LibreOffice computed
and stored with them). Every test first requires that the workbook holds a formula in F2 (the
untouched workbook has none), so doing nothing scores 0."""

import pytest
from openpyxl import load_workbook

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
    values = load_workbook(BOOK, data_only=True)["Audit"]
    assert str(formulas["F2"].value or "").startswith("="), "the workbook was not saved with a formula in F2"
    return formulas, values


def _refs(formula):
    return formula.upper().replace("$", "").replace(" ", "")


def test_variance_formulas(sheets):
    formulas, values = sheets
    for row, (_, _, on_hand, counted, _) in enumerate(INPUTS, start=2):
        cell = formulas[f"F{row}"].value
        assert str(cell).startswith("=") and f"D{row}" in _refs(cell) and f"C{row}" in _refs(cell), (row, cell)
        assert values[f"F{row}"].value == pytest.approx(counted - on_hand), (row, values[f"F{row}"].value)


def test_variance_value_formulas(sheets):
    formulas, values = sheets
    for row, (_, _, on_hand, counted, cost) in enumerate(INPUTS, start=2):
        cell = formulas[f"G{row}"].value
        assert str(cell).startswith("=") and f"E{row}" in _refs(cell), (row, cell)
        assert values[f"G{row}"].value == pytest.approx((counted - on_hand) * cost), (row, values[f"G{row}"].value)


def test_total_is_a_sum_formula(sheets):
    formulas, values = sheets
    cell = str(formulas["G9"].value)
    assert cell.startswith("=") and "G2" in _refs(cell) and "G7" in _refs(cell), cell
    assert values["G9"].value == pytest.approx(sum((c - h) * u for _, _, h, c, u in INPUTS))


def test_inputs_are_kept(sheets):
    formulas, _ = sheets
    for row, expected in enumerate(INPUTS, start=2):
        got = tuple(formulas.cell(row, col).value for col in range(1, 6))
        assert got[:2] == expected[:2] and got[2:] == pytest.approx(expected[2:]), (row, got)
    assert [c.value for c in formulas[1]][:7] == ["SKU", "Item", "On hand", "Counted", "Unit cost", "Variance",
                                                  "Variance value"]
    assert formulas["A9"].value == "Total variance value"
