"""Checks the beam review pack in /app/deliverables: the Checks sheet (recalculated from its
formulas with the `formulas` package), formulas rather than pasted values, recalculation when the
design basis changes, results.csv, and the memo, which must agree with the workbook.

The reward (tests/test.sh): 0 unless the gate tests pass (every deliverable present, the inputs
untouched); then each section's weight times the share of its tests that pass."""

import csv
import hashlib
import re
from pathlib import Path

import pytest

OUT = Path("/app/deliverables")
BOOK = OUT / "beam_review.xlsx"
TOL = 0.01
DELIVERABLES = [BOOK, OUT / "results.csv", OUT / "review_memo.pdf"]
# section weights of the reward; a test test_<section>_* belongs to <section> (the workbook carries
# most: the CSV and the memo are values by nature, and with a values-only workbook they earn < 0.5)
WEIGHTS = {"workbook": 0.65, "csv": 0.20, "memo": 0.15}
# sections whose workbook values count only while every *recalculates* test passes: a value
# the workbook shows but does not compute from its inputs (pasted, or a constant disguised as
# a formula) earns nothing
LIVE = ["workbook"]
NAMES = ["UB 254x146x31", "UB 305x102x28", "UB 305x127x37", "UB 356x127x33", "UB 406x140x39"]
# per section: total UDL kN/m, moment kNm, stress MPa, deflection mm, stress ok, deflection ok, beam cost
EXPECTED = [
    (12.305091, 64.986262, 185.146045, 30.861982, False, False, 551.85),
    (12.276642, 64.836016, 184.193226, 25.322223, False, False, 495.30),
    (12.362970, 65.291935, 138.624066, 19.105632, True, False, 644.15),
    (12.324711, 65.089880, 137.610740, 16.536681, True, True, 576.55),
    (12.382590, 65.395553, 104.299128, 10.955371, True, True, 677.95),
]
DEFLECTION_LIMIT = 18.055556
# the result cells the tests check
RESULTS = [("Checks", f"{c}{r}") for c in "BCDEFGHI" for r in range(2, 7)] + [("Checks", "B8"), ("Checks", "B9")]
INPUT_HASHES = {
    "design_basis.json": "f26dbbec5ed185dea34596dd782fad3d5ed53d193c3687dc8b3b2fb0aeba23ab",
    "sections.csv": "e4181e35ba5dc79b8ec5b76ab2547e911a8cf362df5441ac9bc59526957c83c2",
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

    path = OUT / "review_memo.pdf"
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


def test_workbook_layout_and_inputs():
    from openpyxl import load_workbook

    wb = load_workbook(BOOK)
    assert {"Inputs", "Checks"} <= set(wb.sheetnames)
    ws = wb["Inputs"]
    assert [ws[f"B{r}"].value for r in range(2, 8)] == pytest.approx([6.5, 12.0, 210.0, 165.0, 360.0, 9.81])
    assert [ws[f"A{r}"].value for r in range(10, 15)] == NAMES
    assert [ws[f"C{r}"].value for r in range(10, 15)] == pytest.approx([4413, 5366, 7162, 8249, 12510])


def test_workbook_loads_and_moments(results):
    for i, want in enumerate(EXPECTED):
        r = 2 + i
        assert results.get(("CHECKS", f"A{r}")) == NAMES[i]
        assert close(results.get(("CHECKS", f"B{r}")), want[0]), (r, results.get(("CHECKS", f"B{r}")))
        assert close(results.get(("CHECKS", f"C{r}")), want[1]), (r, results.get(("CHECKS", f"C{r}")))


def test_workbook_stress_and_deflection(results):
    for i, want in enumerate(EXPECTED):
        r = 2 + i
        assert close(results.get(("CHECKS", f"D{r}")), want[2]), (r, results.get(("CHECKS", f"D{r}")))
        assert close(results.get(("CHECKS", f"E{r}")), want[3]), (r, results.get(("CHECKS", f"E{r}")))
        assert close(results.get(("CHECKS", f"F{r}")), DEFLECTION_LIMIT)
        assert close(results.get(("CHECKS", f"I{r}")), want[6])


def test_workbook_pass_flags_and_selection(results):
    flags = [(results.get(("CHECKS", f"G{r}")), results.get(("CHECKS", f"H{r}"))) for r in range(2, 7)]
    assert flags == [(w[4], w[5]) for w in EXPECTED]
    assert close(results.get(("CHECKS", "B8")), 576.55)
    assert results.get(("CHECKS", "B9")) == "UB 356x127x33"


def test_workbook_results_are_formulas():
    bad = pasted()
    assert not bad, f"values or constant formulas instead of formulas referencing cells: {bad[:10]}"


def test_workbook_recalculates_when_the_design_basis_changes():
    heavier = live(recalc(BOOK, {("Inputs", "B3"): 15.0}))
    assert close(heavier.get(("CHECKS", "D5")), 171.107040) and close(heavier.get(("CHECKS", "B8")), 677.95)
    assert heavier.get(("CHECKS", "B9")) == "UB 406x140x39"
    relaxed = live(recalc(BOOK, {("Inputs", "B5"): 190.0, ("Inputs", "B6"): 250.0}))
    assert close(relaxed.get(("CHECKS", "F3")), 26.0) and close(relaxed.get(("CHECKS", "B8")), 495.30)
    assert relaxed.get(("CHECKS", "B9")) == "UB 305x102x28"


def test_csv_results():
    with open(OUT / "results.csv", newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == ["designation", "total_udl_kN_per_m", "moment_kNm", "stress_MPa", "deflection_mm",
                                     "stress_ok", "deflection_ok", "beam_cost"]
        rows = list(reader)
    assert [r["designation"] for r in rows] == NAMES
    for row, want in zip(rows, EXPECTED):
        assert abs(float(row["total_udl_kN_per_m"]) - want[0]) <= 0.001
        assert abs(float(row["moment_kNm"]) - want[1]) <= 0.01
        assert abs(float(row["stress_MPa"]) - want[2]) <= 0.05
        assert abs(float(row["deflection_mm"]) - want[3]) <= 0.05
        assert (row["stress_ok"], row["deflection_ok"]) == tuple("yes" if ok else "no" for ok in want[4:6])
        assert abs(float(row["beam_cost"]) - want[6]) <= TOL


def test_memo_states_the_criteria_and_the_selection():
    text = memo_text()
    assert "Selected section: UB 356x127x33" in text
    for figure in ("137.6", "16.54", "18.06", "576.55"):
        assert figure in text, f"{figure} not in the memo"


def test_memo_agrees_with_the_workbook(values):
    text = memo_text()
    pick = values.get(("CHECKS", "B9"))
    row = next(r for r in range(2, 7) if values.get(("CHECKS", f"A{r}")) == pick)
    assert f"Selected section: {pick}" in text
    for figure in (f"{values[('CHECKS', f'D{row}')]:.1f}", f"{values[('CHECKS', f'E{row}')]:.2f}",
                   f"{values[('CHECKS', 'B8')]:.2f}", f"{values[('CHECKS', 'F2')]:.2f}"):
        assert figure in text, f"{figure} (from the workbook) not in the memo"


def test_gate_inputs_unchanged():
    folder = Path("/app/inputs")
    assert sorted(p.name for p in folder.iterdir()) == sorted(INPUT_HASHES)
    for name, digest in INPUT_HASHES.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name
