"""Checks the saved workbook (openpyxl: the formulas as written, and the header's font). The values
are computed here from the formulas (tests/recalc.py), never read from what the file stored with
them, and again after moving an input: a pasted value or a constant formula does not follow it.
Every test first requires that the workbook holds a formula in F2 (the untouched workbook has
none), so doing nothing scores 0."""

import os
import sys

import pytest
from openpyxl import load_workbook

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recalc import evaluate  # noqa: E402

BOOK = "/app/quarterly-sales.xlsx"
FIGURES = {
    "North": [1240, 1315, 1190, 1402],
    "South": [980, 1044, 1102, 1213],
    "East": [1530, 1488, 1611, 1575],
    "West": [705, 760, 812, 798],
}


@pytest.fixture(scope="module")
def sheets():
    formulas = load_workbook(BOOK)["Sales"]
    assert str(formulas["F2"].value or "").startswith("="), "the workbook was not saved with a formula in F2"
    return formulas, None


def _follows(ws, cell, want, moves):
    """``cell`` computes ``want`` from its formula, and ``want + delta`` after each input move."""
    assert str(ws[cell].value).startswith("="), (cell, ws[cell].value)
    assert evaluate(ws, cell) == pytest.approx(want), (cell, ws[cell].value)
    for changes, delta in moves:
        assert evaluate(ws, cell, changes) == pytest.approx(want + delta), (cell, ws[cell].value, changes)


def test_year_totals_are_formulas(sheets):
    ws, _ = sheets
    for row, figures in enumerate(FIGURES.values(), start=2):
        moves = [({f"{letter}{row}": figures[i] + 1000}, 1000) for i, letter in enumerate("BCDE")]
        _follows(ws, f"F{row}", sum(figures), moves)


def test_total_row_is_formulas(sheets):
    ws, _ = sheets
    columns = list(zip(*FIGURES.values()))
    for col, letter in enumerate("BCDE"):
        moves = [({f"{letter}{row}": columns[col][row - 2] + 1000}, 1000) for row in range(2, 6)]
        _follows(ws, f"{letter}6", sum(columns[col]), moves)
    moves = [({f"{letter}{row}": columns[col][row - 2] + 1000}, 1000) for col, letter in enumerate("BCDE")
             for row in (2, 5)]
    _follows(ws, "F6", sum(map(sum, FIGURES.values())), moves)


def test_header_row_is_bold(sheets):
    formulas, _ = sheets
    assert all(formulas.cell(1, col).font.b for col in range(1, 7)), [formulas.cell(1, c).font.b for c in range(1, 7)]


def test_bookkeeping_figures_and_labels_are_kept(sheets):
    formulas, _ = sheets
    assert [c.value for c in formulas[1]][:6] == ["Region", "Q1", "Q2", "Q3", "Q4", "Year"]
    for row, (region, figures) in enumerate(FIGURES.items(), start=2):
        assert [formulas.cell(row, col).value for col in range(1, 6)] == [region, *figures], row
        assert not formulas.cell(row, 1).font.b
    assert formulas["A6"].value == "Total"
