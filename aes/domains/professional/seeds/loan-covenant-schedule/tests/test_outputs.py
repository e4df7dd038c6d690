"""Checks the credit pack in /app/deliverables: the Schedule and Covenants sheets (recalculated from
their formulas with the `formulas` package), formulas rather than pasted values, recalculation when
the terms or the forecast change, covenants.csv and the credit memo, both of which must agree with
the workbook.

The reward (tests/test.sh): 0 unless the gate tests pass (every deliverable present, the inputs
untouched); then each section's weight times the share of its tests that pass."""

import csv
import hashlib
import re
from pathlib import Path

import pytest

OUT = Path("/app/deliverables")
BOOK = OUT / "loan_model.xlsx"
TOL, RATIO_TOL = 0.01, 0.0001
DELIVERABLES = [BOOK, OUT / "covenants.csv", OUT / "credit_memo.pdf"]
# section weights of the reward; a test test_<section>_* belongs to <section>
WEIGHTS = {"schedule": 0.25, "covenants": 0.25, "model": 0.20, "csv": 0.15, "memo": 0.15}
# sections whose workbook values count only while every *recalculates* test passes: a value
# the workbook shows but does not compute from its inputs (pasted, or a constant disguised as
# a formula) earns nothing
LIVE = ["schedule", "covenants"]

PAYMENT, TOTAL_INTEREST, DEBT_SERVICE = 21885.264301, 213115.858081, 262623.171616
# Schedule rows: month, opening balance, payment, interest, principal, closing balance
SCHEDULE = {1: (1100000.0, 21885.264301, 6600.0, 15285.264301, 1084714.735699),
            2: (1084714.735699, 21885.264301, 6508.288414, 15376.975887, 1069337.759812),
            13: (910401.154327, 21885.264301, 5462.406926, 16422.857375, 893978.296952),
            30: (617400.919815, 21885.264301, 3704.405519, 18180.858782, 599220.061033),
            60: (21754.735886, 21885.264301, 130.528415, 21754.735886, 0.0)}
EBITDA = [318000.0, 372500.0, 401000.0, 356800.0, 447200.0]
DSCR = [1.210860, 1.418382, 1.526903, 1.358601, 1.702820]
YEAR_END = [910401.154327, 706691.572416, 487821.074297, 252661.321596, 0.0]
LEVERAGE = [2.862897, 1.897159, 1.216511, 0.708132, 0.0]
STATUS = ["BREACH", "OK", "OK", "OK", "OK"]
# the result cells the tests check
RESULTS = [("Schedule", f"{c}{r}") for c in "BCDEF" for r in range(2, 62)]
RESULTS += [("Covenants", f"{c}{r}") for c in "BCDEFGHI" for r in range(2, 7)]
RESULTS += [("Covenants", f"B{r}") for r in (8, 9, 10)]
INPUT_HASHES = {
    "ebitda_forecast.csv": "c38c7837af1b3fef6545c3fcb175d55d71e6f5682210d71fc53280173c1f244b",
    "loan_terms.csv": "2fc0e928d8656a995ddfcbe5abf83344e2126252fb47e7765de109c229825b89",
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


def close(got, want, tol=TOL):
    return isinstance(got, (int, float)) and not isinstance(got, bool) and abs(got - want) <= tol


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


def covenant_column(values, col):
    return [values.get(("COVENANTS", f"{col}{r}")) for r in range(2, 7)]


def csv_rows():
    with open(OUT / "covenants.csv", newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == ["year", "ebitda", "debt_service", "dscr", "year_end_balance", "leverage", "status"]
        return list(reader)


def memo_text():
    from pypdf import PdfReader

    path = OUT / "credit_memo.pdf"
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


def test_schedule_layout_and_inputs():
    from openpyxl import load_workbook

    wb = load_workbook(BOOK)
    assert {"Inputs", "Schedule", "Covenants"} <= set(wb.sheetnames)
    ws = wb["Inputs"]
    assert [ws[f"B{r}"].value for r in range(2, 7)] == pytest.approx([1100000.0, 0.072, 60.0, 1.25, 3.25])
    assert [ws[f"B{r}"].value for r in range(10, 15)] == pytest.approx(EBITDA)
    assert [wb["Schedule"].cell(1, c).value for c in range(1, 7)] == [
        "Month", "Opening balance", "Payment", "Interest", "Principal", "Closing balance"]


def test_schedule_values(results):
    for month, want in SCHEDULE.items():
        got = [results.get(("SCHEDULE", f"{c}{month + 1}")) for c in "BCDEF"]
        assert all(close(g, w) for g, w in zip(got, want)), (month, got)


def test_covenants_debt_service_dscr_and_leverage(results):
    assert all(close(g, w) for g, w in zip(covenant_column(results, "B"), EBITDA))
    assert all(close(g, DEBT_SERVICE) for g in covenant_column(results, "C")), covenant_column(results, "C")
    dscr, balance, leverage = (covenant_column(results, c) for c in "DEF")
    assert all(close(g, w, RATIO_TOL) for g, w in zip(dscr, DSCR)), dscr
    assert all(close(g, w) for g, w in zip(balance, YEAR_END)), balance
    assert all(close(g, w, RATIO_TOL) for g, w in zip(leverage, LEVERAGE)), leverage


def test_covenants_flags_and_summary(results):
    assert covenant_column(results, "G") == [False, True, True, True, True]
    assert covenant_column(results, "H") == [True] * 5
    assert covenant_column(results, "I") == STATUS
    assert close(results.get(("COVENANTS", "B8")), PAYMENT) and close(results.get(("COVENANTS", "B9")), TOTAL_INTEREST)
    assert results.get(("COVENANTS", "B10")) == 1


def test_model_results_are_formulas():
    bad = pasted()
    assert not bad, f"values or constant formulas instead of formulas referencing cells: {bad[:10]}"


def test_model_recalculates_when_the_forecast_changes():
    better = live(recalc(BOOK, {("Inputs", "B10"): 340000.0}))
    assert close(better.get(("COVENANTS", "D2")), 1.294631, RATIO_TOL)
    assert close(better.get(("COVENANTS", "F2")), 2.677650, RATIO_TOL)
    assert covenant_column(better, "I") == ["OK"] * 5 and better.get(("COVENANTS", "B10")) == 0


def test_model_recalculates_when_the_principal_changes():
    bigger = live(recalc(BOOK, {("Inputs", "B2"): 1280000.0}))
    assert close(bigger.get(("COVENANTS", "B8")), 25466.489369)
    assert close(bigger.get(("COVENANTS", "B9")), 247989.362130)
    assert close(bigger.get(("COVENANTS", "F2")), 3.331371, RATIO_TOL) and bigger.get(("COVENANTS", "H2")) is False
    assert covenant_column(bigger, "I") == ["BREACH", "BREACH", "OK", "BREACH", "OK"]
    assert bigger.get(("COVENANTS", "B10")) == 3


def test_csv_values():
    rows = csv_rows()
    assert [int(row["year"]) for row in rows] == [1, 2, 3, 4, 5]
    for i, row in enumerate(rows):
        assert abs(float(row["ebitda"]) - EBITDA[i]) <= TOL and abs(float(row["debt_service"]) - DEBT_SERVICE) <= TOL
        assert abs(float(row["dscr"]) - DSCR[i]) <= RATIO_TOL and abs(float(row["leverage"]) - LEVERAGE[i]) <= RATIO_TOL
        assert abs(float(row["year_end_balance"]) - YEAR_END[i]) <= TOL and row["status"] == STATUS[i]


def test_csv_agrees_with_the_workbook(values):
    rows = csv_rows()
    assert [row["status"] for row in rows] == covenant_column(values, "I")
    for row, dscr, balance in zip(rows, covenant_column(values, "D"), covenant_column(values, "E")):
        assert abs(float(row["dscr"]) - dscr) <= RATIO_TOL and abs(float(row["year_end_balance"]) - balance) <= TOL


def test_memo_figures_and_recommendation():
    text = memo_text()
    for figure in ("21,885.26", "213,115.86", "1.21", "2.86", "1.42", "1.70"):
        assert figure in text, f"{figure} not in the memo"
    assert "Breach years: 1" in text and "Breach years: 1," not in text
    assert "Recommendation: CONDITIONAL" in text and "APPROVE" not in text and "DECLINE" not in text


def test_memo_agrees_with_the_workbook(values):
    text = memo_text()
    for cell in ("B8", "B9"):
        amount = f"{values[('COVENANTS', cell)]:,.2f}"
        assert amount in text, f"Covenants!{cell} ({amount}) not in the memo"
    for dscr in covenant_column(values, "D"):
        assert f"{dscr:.2f}" in text, f"DSCR {dscr:.2f} (from the workbook) not in the memo"
    years = [str(y) for y, status in zip(range(1, 6), covenant_column(values, "I")) if status == "BREACH"]
    assert f"Breach years: {', '.join(years) or 'none'}" in text
    breaches = values.get(("COVENANTS", "B10"))
    decision = "APPROVE" if breaches == 0 else "CONDITIONAL" if breaches == 1 else "DECLINE"
    assert f"Recommendation: {decision}" in text


def test_gate_inputs_unchanged():
    folder = Path("/app/inputs")
    assert sorted(p.name for p in folder.iterdir()) == sorted(INPUT_HASHES)
    for name, digest in INPUT_HASHES.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name
