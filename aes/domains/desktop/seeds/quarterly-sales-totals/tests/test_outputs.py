"""Checks the saved workbook (openpyxl: formulas, the values LibreOffice stored with them, and the
header's font). Every test first requires that the workbook holds a formula in F2 (the untouched
workbook has none), so doing nothing scores 0."""

import pytest
from openpyxl import load_workbook

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
    values = load_workbook(BOOK, data_only=True)["Sales"]
    assert str(formulas["F2"].value or "").startswith("="), "the workbook was not saved with a formula in F2"
    return formulas, values


def test_year_totals_are_formulas(sheets):
    formulas, values = sheets
    for row, figures in enumerate(FIGURES.values(), start=2):
        assert str(formulas[f"F{row}"].value).startswith("="), (row, formulas[f"F{row}"].value)
        assert values[f"F{row}"].value == pytest.approx(sum(figures)), (row, values[f"F{row}"].value)


def test_total_row_is_formulas(sheets):
    formulas, values = sheets
    columns = list(zip(*FIGURES.values()))
    for col, letter in enumerate("BCDE"):
        assert str(formulas[f"{letter}6"].value).startswith("="), (letter, formulas[f"{letter}6"].value)
        assert values[f"{letter}6"].value == pytest.approx(sum(columns[col])), letter
    assert str(formulas["F6"].value).startswith("=")
    assert values["F6"].value == pytest.approx(sum(map(sum, FIGURES.values())))


def test_header_row_is_bold(sheets):
    formulas, _ = sheets
    assert all(formulas.cell(1, col).font.b for col in range(1, 7)), [formulas.cell(1, c).font.b for c in range(1, 7)]


def test_figures_and_labels_are_kept(sheets):
    formulas, _ = sheets
    assert [c.value for c in formulas[1]][:6] == ["Region", "Q1", "Q2", "Q3", "Q4", "Year"]
    for row, (region, figures) in enumerate(FIGURES.items(), start=2):
        assert [formulas.cell(row, col).value for col in range(1, 6)] == [region, *figures], row
        assert not formulas.cell(row, 1).font.b
    assert formulas["A6"].value == "Total"
