"""Checks the Q1 variance pack in /app/deliverables: the Variance sheet (recalculated from its
formulas with the `formulas` package, tolerance 0.01), formulas rather than pasted values,
recalculation when a posting or the policy changes, and flagged.csv, which must agree with the
workbook.

The reward (tests/test.sh): 0 unless the gate tests pass (every deliverable present, the inputs
untouched); then each section's weight times the share of its tests that pass."""

import csv
import hashlib
import re
from pathlib import Path

import pytest

OUT = Path("/app/deliverables")
BOOK = OUT / "variance_q1.xlsx"
TOL = 0.01
DELIVERABLES = [BOOK, OUT / "flagged.csv"]
# section weights of the reward; a test test_<section>_* belongs to <section>
WEIGHTS = {"workbook": 0.45, "model": 0.25, "csv": 0.30}
# sections whose workbook values count only while every *recalculates* test passes: a value
# the workbook shows but does not compute from its inputs (pasted, or a constant disguised as
# a formula) earns nothing
LIVE = ["workbook"]
CODES = ["CC-110", "CC-120", "CC-210", "CC-220", "CC-310", "CC-320", "CC-410", "CC-510", "CC-610"]
BUDGETS = [84000.0, 56500.0, 132000.0, 118500.0, 96000.0, 71200.0, 64800.0, 38900.0, 21000.0]
ACTUALS = [83220.95, 57656.25, 141065.95, 111000.00, 99385.85, 74126.25, 69885.40, 39716.25, 22750.00]
FLAGS = ["OK", "OK", "REVIEW", "REVIEW", "OK", "OK", "REVIEW", "OK", "OK"]
TOTALS = [682900.00, 698806.90, 15906.90, 0.0232932]
# the result cells the tests check
RESULTS = [("Variance", f"{c}{r}") for c in "DEFG" for r in range(2, 11)] + [("Variance", f"{c}11") for c in "CDEF"]
INPUT_HASHES = {
    "actuals_q1.csv": "cee43e98ca028cf6a2544824849f95939d7f43044e65df034fe82b56fc74526e",
    "budget_q1.csv": "ef21342b175c35be013644055440653723ed2d13155d2d653ba51d9fc9672d5b",
    "variance_policy.md": "75652f096e2d63691adf4acda97d43a36faabfd36bcf58c3a0bc355d1ad8f1ee",
}


def recalc(path, changes=None):
    """Every cell's value after recalculating the workbook's formulas: {(SHEET, CELL): value}.
    ``changes`` ({(sheet, cell): value}) replaces input cells first."""
    import formulas

    model = formulas.ExcelModel().loads(str(path)).finish()
    inputs = {f"'[{path.name}]{sheet.upper()}'!{cell}": value for (sheet, cell), value in (changes or {}).items()}
    values = {}
    for key, ranges in model.calculate(inputs=inputs).items():
        where, _, cell = key.rpartition("!")
        if ":" in cell:
            continue
        value = getattr(ranges, "value", ranges)
        value = value[0, 0] if getattr(value, "shape", None) else value
        values[(where.strip("'").split("]", 1)[-1].upper(), cell)] = value.item() if hasattr(value, "item") else value
    return values


def close(got, want):
    return isinstance(got, (int, float)) and not isinstance(got, bool) and abs(got - want) <= TOL


# A result cell the tests check counts only as a formula that references at least one cell or range
# (B2, $B$2, Inputs!B4, 'Weekly plan'!C3, B2:B9, A:A): a pasted value, or a constant formula such as
# =126352.40, =100+26252.4, =LOG10(100) or ="B2", fails the formula test and every value test of
# that cell. Text in quotes (strings, quoted sheet names) is set aside first; a function name (LOG10)
# is followed by "(" and a name or number runs into the letters or digits around it, so neither counts.
_QUOTED = re.compile(r"\"(?:[^\"]|\"\")*\"|'(?:[^']|'')*'")
_CELL_REF = re.compile(r"(?<![\w.$])(?:\$?[A-Za-z]{1,3}\$?[0-9]+|\$?[A-Za-z]{1,3}:\$?[A-Za-z]{1,3}|\$?[0-9]+:\$?[0-9]+)"
                       r"(?![\w(.!])")


def references_cells(formula):
    """True when ``formula`` (a cell's value as openpyxl reads it) is a formula referencing a cell."""
    text = str(getattr(formula, "text", formula) or "")
    if not text.startswith("="):
        return False
    body = _QUOTED.sub(lambda m: '""' if m.group().startswith('"') else "S", text[1:])
    return _CELL_REF.search(body) is not None


def pasted(path=BOOK):
    """The result cells (RESULTS) that are not formulas referencing cells: [(sheet, cell)]."""
    from openpyxl import load_workbook

    wb = load_workbook(path)
    return [(s, c) for s, c in RESULTS if s not in wb.sheetnames or not references_cells(wb[s][c].value)]


def live(values, path=BOOK):
    """``values`` (from recalc) with every result cell that is not a formula referencing cells set
    to None, so that the value tests of a pasted value or a constant formula fail."""
    return {**values, **dict.fromkeys((s.upper(), c) for s, c in pasted(path))}


def column(values, col, rows=range(2, 11)):
    return [values.get(("VARIANCE", f"{col}{r}")) for r in rows]


def flagged_rows():
    with open(OUT / "flagged.csv", newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == ["cost_centre", "name", "budget", "actual", "variance", "variance_pct"]
        return list(reader)


@pytest.fixture(scope="module")
def values():
    """Every cell as recalculated (what the CSV and the memo must agree with)."""
    return recalc(BOOK)


@pytest.fixture(scope="module")
def results(values):
    """The same, with the result cells that are not formulas referencing cells set to None."""
    return live(values)


def test_gate_deliverables_exist():
    missing = [str(p) for p in DELIVERABLES if not p.is_file() or p.stat().st_size == 0]
    assert not missing, f"missing or empty: {missing}"


def test_workbook_layout_and_typed_inputs():
    from openpyxl import load_workbook

    wb = load_workbook(BOOK)
    assert {"Policy", "Actuals", "Variance"} <= set(wb.sheetnames)
    assert [wb["Policy"]["B1"].value, wb["Policy"]["B2"].value] == pytest.approx([0.05, 2000.0])
    actuals = wb["Actuals"]
    assert [actuals.cell(1, c).value for c in (1, 2, 3)] == ["month", "cost_centre", "amount"]
    assert actuals["B21"].value == "CC-610" and actuals["C21"].value == pytest.approx(8940.50)
    assert actuals["C32"].value == pytest.approx(7689.50) and actuals["A33"].value is None
    ws = wb["Variance"]
    assert [ws[f"A{r}"].value for r in range(2, 11)] == CODES
    assert [ws[f"C{r}"].value for r in range(2, 11)] == pytest.approx(BUDGETS)


def test_workbook_actual_spend_per_cost_centre(results):
    got = column(results, "D")
    assert all(close(g, w) for g, w in zip(got, ACTUALS)), got


def test_workbook_variance_and_percentage(results):
    variance, pct = column(results, "E"), column(results, "F")
    assert all(close(g, a - b) for g, a, b in zip(variance, ACTUALS, BUDGETS)), variance
    assert all(isinstance(g, float) and abs(g - (a - b) / b) <= 1e-6 for g, a, b in zip(pct, ACTUALS, BUDGETS)), pct


def test_workbook_review_flags(results):
    assert column(results, "G") == FLAGS


def test_workbook_totals_row(results):
    got = [results.get(("VARIANCE", f"{c}11")) for c in "CDEF"]
    assert all(close(g, w) for g, w in zip(got[:3], TOTALS[:3])) and abs(got[3] - TOTALS[3]) <= 1e-6, got


def test_model_results_are_formulas():
    bad = pasted()
    assert not bad, f"values or constant formulas instead of formulas referencing cells: {bad[:10]}"


def test_model_recalculates_when_inputs_change():
    stricter = live(recalc(BOOK, {("Policy", "B2"): 6000.0}))
    assert column(stricter, "G") == ["OK", "OK", "REVIEW", "REVIEW", "OK", "OK", "OK", "OK", "OK"]
    posted = live(recalc(BOOK, {("Actuals", "C21"): 9440.50}))
    assert close(posted.get(("VARIANCE", "D10")), 23250.00) and close(posted.get(("VARIANCE", "D11")), 699306.90)
    assert column(posted, "G") == ["OK", "OK", "REVIEW", "REVIEW", "OK", "OK", "REVIEW", "OK", "REVIEW"]


def test_csv_flagged():
    rows = flagged_rows()
    assert [(r["cost_centre"], r["name"]) for r in rows] == [("CC-210", "Sales North"), ("CC-220", "Sales South"),
                                                             ("CC-410", "IT Services")]
    want = [(132000.00, 141065.95, 9065.95, 6.87), (118500.00, 111000.00, -7500.00, -6.33),
            (64800.00, 69885.40, 5085.40, 7.85)]
    for row, (budget, actual, variance, pct) in zip(rows, want):
        assert abs(float(row["budget"]) - budget) <= TOL and abs(float(row["actual"]) - actual) <= TOL
        assert abs(float(row["variance"]) - variance) <= TOL and abs(float(row["variance_pct"]) - pct) <= TOL


def test_csv_agrees_with_the_workbook(values):
    review = [r for r in range(2, 11) if values.get(("VARIANCE", f"G{r}")) == "REVIEW"]
    review.sort(key=lambda r: -abs(values[("VARIANCE", f"E{r}")]))
    rows = flagged_rows()
    assert [row["cost_centre"] for row in rows] == [values[("VARIANCE", f"A{r}")] for r in review]
    for row, r in zip(rows, review):
        assert abs(float(row["actual"]) - values[("VARIANCE", f"D{r}")]) <= TOL
        assert abs(float(row["variance"]) - values[("VARIANCE", f"E{r}")]) <= TOL
        assert abs(float(row["variance_pct"]) - 100 * values[("VARIANCE", f"F{r}")]) <= TOL


def test_gate_inputs_unchanged():
    folder = Path("/app/inputs")
    assert sorted(p.name for p in folder.iterdir()) == sorted(INPUT_HASHES)
    for name, digest in INPUT_HASHES.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name
