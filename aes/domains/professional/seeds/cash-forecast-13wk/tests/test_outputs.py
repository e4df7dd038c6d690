"""Checks the treasury pack in /app/deliverables: workbook values (recalculated from its formulas
with the `formulas` package, tolerance 0.01), formulas rather than pasted values, recalculation
when an input changes, summary.csv, and the CFO memo, which must agree with the workbook.

The reward (tests/test.sh): 0 unless the gate tests pass (every deliverable present, the inputs
untouched); then each section's weight times the share of its tests that pass: the Base forecast
30%, risk (Stress case, summary) 30%, a reusable model 25%, the CFO handoff 15%."""

import csv
import hashlib
import re
from pathlib import Path

import pytest

OUT = Path("/app/deliverables")
BOOK = OUT / "cash_forecast.xlsx"
TOL = 0.01
DELIVERABLES = [BOOK, OUT / "summary.csv", OUT / "cfo_memo.pdf"]
# section weights of the reward; a test test_<section>_* belongs to <section>
WEIGHTS = {"base": 0.30, "risk": 0.30, "model": 0.25, "memo": 0.15}
# sections whose workbook values count only while every *recalculates* test passes: a value
# the workbook shows but does not compute from its inputs (pasted, or a constant disguised as
# a formula) earns nothing
LIVE = ["base", "risk"]

BASE_CLOSING = [126352.40, 163432.05, 167560.75, 206380.75, 194528.65, 231028.55, 204105.35, 245223.00,
                226089.40, 271091.95, 274229.15, 313720.60, 305015.15]
STRESS_RECEIPTS = [0.0, 82035.54, 74974.38, 88671.06, 78047.00, 84774.45, 73448.76, 96004.78, 80438.26,
                   76600.89, 86566.17, 82710.18, 76433.23]
STRESS_CLOSING = [29840.00, 60750.04, 35534.22, 71205.28, 37665.53, 72529.58, 6108.34, 48597.52, 19783.48,
                  39544.38, 31941.64, 64221.83, 23494.61]
# Summary!B2:C5 (Base, Stress): minimum closing cash, week of minimum, weeks below buffer, funding need
SUMMARY = [[126352.40, 6108.34], [1, 7], [0, 9], [0.0, 53891.66]]
# the same after opening cash 152,500 (Inputs!B2) and a stress collection rate of 0.9 (Inputs!B4)
SUMMARY_CHANGED = [[136352.40, 39840.00], [1, 1], [0, 3], [0.0, 20160.00]]
# the closing cash after week-1 receipts fall by 20,000 (Inputs!C9) and week-7 suppliers rise by
# 10,000 (Inputs!E15): every Base and Stress week moves, the Stress case falls below zero
BASE_CHANGED = [106352.40, 143432.05, 147560.75, 186380.75, 174528.65, 211028.55, 174105.35, 215223.00,
                196089.40, 241091.95, 244229.15, 283720.60, 275015.15]
STRESS_CHANGED = [29840.00, 43750.04, 18534.22, 54205.28, 20665.53, 55529.58, -20891.66, 21597.52, -7216.52,
                  12544.38, 4941.64, 37221.83, -3505.39]
# the result cells the tests check (Stress!B2 is 0 by the policy: collections arrive a week late,
# so nothing is collected in week 1 and there is nothing for it to reference)
RESULTS = [(s, f"{c}{r}") for s in ("Base", "Stress") for c in "BCDE" for r in range(2, 15)
           if (s, c, r) != ("Stress", "B", 2)]
RESULTS += [("Summary", f"{c}{r}") for c in "BC" for r in range(2, 6)]
INPUT_HASHES = {
    "assumptions.csv": "cb4841b4afe509bd847894f1118a070e06311141c3165b65ed1fb21dea0ec581",
    "weekly_plan.csv": "cd6b0f25a4dbad1e915ea5cc33bb519588ba9a5c48f1eee76aef13e6575b9334",
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


def memo_text():
    from pypdf import PdfReader

    path = OUT / "cfo_memo.pdf"
    assert path.read_bytes()[:5] == b"%PDF-"
    return " ".join(" ".join(page.extract_text() or "" for page in PdfReader(str(path)).pages).split())


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


def test_base_layout_and_inputs():
    from openpyxl import load_workbook

    wb = load_workbook(BOOK)
    assert {"Inputs", "Base", "Stress", "Summary"} <= set(wb.sheetnames)
    for name in ("Base", "Stress"):
        assert [wb[name].cell(1, c).value for c in range(1, 6)] == ["Week", "Receipts", "Payments", "Net flow",
                                                                     "Closing cash"]
    ws = wb["Inputs"]
    assert [ws[f"B{r}"].value for r in range(2, 6)] == pytest.approx([142500.0, 60000.0, 0.85, 120000.0])
    assert [ws[f"C{r}"].value for r in (9, 15, 21)] == pytest.approx([96512.40, 112946.80, 108455.00])
    assert [ws[f"F{r}"].value for r in (9, 15, 21)] == pytest.approx([18500.0, 39600.0, 18500.0])


def test_base_forecast(results):
    got = [results.get(("BASE", f"E{r}")) for r in range(2, 15)]
    assert all(close(g, w) for g, w in zip(got, BASE_CLOSING)), got
    assert close(results.get(("BASE", "C8")), 139870.0) and close(results.get(("BASE", "D8")), -26923.20)


def test_risk_stress_forecast(results):
    receipts = [results.get(("STRESS", f"B{r}")) for r in range(2, 15)]
    assert all(close(g, w) for g, w in zip(receipts, STRESS_RECEIPTS)), receipts
    got = [results.get(("STRESS", f"E{r}")) for r in range(2, 15)]
    assert all(close(g, w) for g, w in zip(got, STRESS_CLOSING)), got


def test_risk_summary_sheet(results):
    got = [[results.get(("SUMMARY", f"{c}{r}")) for c in "BC"] for r in range(2, 6)]
    assert all(close(g, w) for row, want in zip(got, SUMMARY) for g, w in zip(row, want)), got


def test_model_results_are_formulas():
    bad = pasted()
    assert not bad, f"values or constant formulas instead of formulas referencing cells: {bad[:10]}"


def test_model_recalculates_when_inputs_change():
    values = live(recalc(BOOK, {("Inputs", "B2"): 152500.0, ("Inputs", "B4"): 0.9}))
    got = [[values.get(("SUMMARY", f"{c}{r}")) for c in "BC"] for r in range(2, 6)]
    assert all(close(g, w) for row, want in zip(got, SUMMARY_CHANGED) for g, w in zip(row, want)), got
    later = live(recalc(BOOK, {("Inputs", "C9"): 76512.40, ("Inputs", "E15"): 68420.00}))
    for sheet, want in (("BASE", BASE_CHANGED), ("STRESS", STRESS_CHANGED)):
        got = [later.get((sheet, f"E{r}")) for r in range(2, 15)]
        assert all(close(g, w) for g, w in zip(got, want)), (sheet, got)
    assert later.get(("SUMMARY", "C4")) == 13 and close(later.get(("SUMMARY", "C5")), 80891.66)


def test_risk_summary_csv():
    with open(OUT / "summary.csv", newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == ["case", "min_closing_cash", "min_week", "weeks_below_buffer", "funding_need"]
        rows = {row["case"]: row for row in reader}
    assert set(rows) == {"base", "stress"}
    for i, case in enumerate(("base", "stress")):
        row = rows[case]
        assert abs(float(row["min_closing_cash"]) - SUMMARY[0][i]) <= TOL
        assert int(row["min_week"]) == SUMMARY[1][i] and int(row["weeks_below_buffer"]) == SUMMARY[2][i]
        assert abs(float(row["funding_need"]) - SUMMARY[3][i]) <= TOL


def test_memo_amounts_and_recommendation():
    text = memo_text()
    for amount in ("126,352.40", "6,108.34", "53,891.66"):
        assert amount in text, f"{amount} not in the memo"
    assert "Recommendation: DRAW" in text and "ESCALATE" not in text and "NO DRAW" not in text


def test_memo_agrees_with_the_workbook(values):
    text = memo_text()
    for cell in ("B2", "C2", "C5"):
        amount = f"{values[('SUMMARY', cell)]:,.2f}"
        assert amount in text, f"Summary!{cell} ({amount}) not in the memo"
    from openpyxl import load_workbook

    need, limit = values[("SUMMARY", "C5")], load_workbook(BOOK)["Inputs"]["B5"].value
    decision = "NO DRAW" if need <= 0 else "DRAW" if need <= limit else "ESCALATE"
    assert f"Recommendation: {decision}" in text


def test_gate_inputs_unchanged():
    folder = Path("/app/inputs")
    assert sorted(p.name for p in folder.iterdir()) == sorted(INPUT_HASHES)
    for name, digest in INPUT_HASHES.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name
