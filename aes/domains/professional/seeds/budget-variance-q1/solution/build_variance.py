"""Reference solution: the Q1 budget variance workbook (live formulas) and flagged.csv from the
read-only budget, postings and policy in /app/inputs."""

import csv
from pathlib import Path

from openpyxl import Workbook
from openpyxl.styles import Font

INPUTS, OUT = Path("/app/inputs"), Path("/app/deliverables")
OUT.mkdir(parents=True, exist_ok=True)
with open(INPUTS / "budget_q1.csv", newline="") as f:
    budget = list(csv.DictReader(f))
with open(INPUTS / "actuals_q1.csv", newline="") as f:
    postings = list(csv.DictReader(f))
PCT, AMOUNT = 0.05, 2000.0  # policy FP-12 (variance_policy.md)

wb = Workbook()
policy = wb.active
policy.title = "Policy"
policy["A1"], policy["B1"] = "Threshold variance % (absolute, exclusive)", PCT
policy["A2"], policy["B2"] = "Threshold variance (absolute, exclusive)", AMOUNT

actuals = wb.create_sheet("Actuals")
actuals.append(["month", "cost_centre", "amount"])
for p in postings:
    actuals.append([p["month"], p["cost_centre"], float(p["amount"])])
last = 1 + len(postings)

ws = wb.create_sheet("Variance")
ws.append(["Cost centre", "Name", "Budget", "Actual", "Variance", "Variance %", "Flag"])
for i, b in enumerate(budget):
    r = 2 + i
    ws[f"A{r}"], ws[f"B{r}"], ws[f"C{r}"] = b["cost_centre"], b["name"], float(b["q1_budget"])
    ws[f"D{r}"] = f"=SUMIF(Actuals!$B$2:$B${last},A{r},Actuals!$C$2:$C${last})"
    ws[f"E{r}"] = f"=D{r}-C{r}"
    ws[f"F{r}"] = f"=E{r}/C{r}"
    ws[f"G{r}"] = f'=IF(AND(ABS(F{r})>Policy!$B$1,ABS(E{r})>Policy!$B$2),"REVIEW","OK")'
total, end = 2 + len(budget), 1 + len(budget)
ws[f"A{total}"] = "Total"
for col in "CDE":
    ws[f"{col}{total}"] = f"=SUM({col}2:{col}{end})"
ws[f"F{total}"] = f"=E{total}/C{total}"
for sheet in (actuals, ws):
    for cell in sheet[1]:
        cell.font = Font(bold=True)
wb.save(OUT / "variance_q1.xlsx")

spent = {}
for p in postings:
    spent[p["cost_centre"]] = spent.get(p["cost_centre"], 0.0) + float(p["amount"])
flagged = []
for b in budget:
    planned = float(b["q1_budget"])
    actual = round(spent.get(b["cost_centre"], 0.0), 2)
    variance = round(actual - planned, 2)
    if abs(variance / planned) > PCT and abs(variance) > AMOUNT:
        flagged.append((b["cost_centre"], b["name"], planned, actual, variance, variance / planned * 100))
flagged.sort(key=lambda row: -abs(row[4]))
with open(OUT / "flagged.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["cost_centre", "name", "budget", "actual", "variance", "variance_pct"])
    for code, name, planned, actual, variance, pct in flagged:
        writer.writerow([code, name, f"{planned:.2f}", f"{actual:.2f}", f"{variance:.2f}", f"{pct:.2f}"])
print("flagged:", [row[0] for row in flagged])
