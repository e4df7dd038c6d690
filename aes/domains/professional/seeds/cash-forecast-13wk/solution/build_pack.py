"""Reference solution: the 13-week cash forecast workbook (live formulas), summary.csv and the
CFO memo, all from the read-only inputs in /app/inputs."""

import csv
from pathlib import Path

from openpyxl import Workbook
from openpyxl.styles import Font
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

INPUTS, OUT = Path("/app/inputs"), Path("/app/deliverables")
OUT.mkdir(parents=True, exist_ok=True)

with open(INPUTS / "assumptions.csv", newline="") as f:
    assumptions = {row["name"]: float(row["value"]) for row in csv.DictReader(f)}
with open(INPUTS / "weekly_plan.csv", newline="") as f:
    plan = list(csv.DictReader(f))
assert len(plan) == 13

# --- the workbook -------------------------------------------------------------------------
wb = Workbook()
inputs = wb.active
inputs.title = "Inputs"
inputs.append(["Assumption", "Value"])
for name in ("opening_cash", "minimum_buffer", "stress_collection_rate", "revolver_limit"):
    inputs.append([name, assumptions[name]])
inputs["A8"], inputs["B8"], inputs["C8"] = "Week", "Week starting", "Receipts"
inputs["D8"], inputs["E8"], inputs["F8"] = "Payroll", "Suppliers", "Rent and other"
for i, row in enumerate(plan):
    r = 9 + i
    inputs.cell(r, 1, int(row["week"]))
    inputs.cell(r, 2, row["week_starting"])
    for col, key in ((3, "receipts"), (4, "payroll"), (5, "suppliers"), (6, "rent_and_other")):
        inputs.cell(r, col, float(row[key]))

for name in ("Base", "Stress"):
    ws = wb.create_sheet(name)
    ws.append(["Week", "Receipts", "Payments", "Net flow", "Closing cash"])
    for i in range(13):
        r, src = 2 + i, 9 + i
        ws[f"A{r}"] = f"=Inputs!A{src}"
        if name == "Base":
            ws[f"B{r}"] = f"=Inputs!C{src}"
        else:  # collections arrive a week late, and only the stress collection rate of them
            ws[f"B{r}"] = "=0" if i == 0 else f"=Inputs!$B$4*Inputs!C{src - 1}"
        ws[f"C{r}"] = f"=Inputs!D{src}+Inputs!E{src}+Inputs!F{src}"
        ws[f"D{r}"] = f"=B{r}-C{r}"
        ws[f"E{r}"] = f"=Inputs!$B$2+D{r}" if i == 0 else f"=E{r - 1}+D{r}"

summary = wb.create_sheet("Summary")
summary.append(["Metric", "Base", "Stress"])
labels = ["Minimum closing cash", "Week of minimum", "Weeks below buffer", "Funding need"]
for i, label in enumerate(labels):
    summary.cell(2 + i, 1, label)
for col, sheet in (("B", "Base"), ("C", "Stress")):
    summary[f"{col}2"] = f"=MIN({sheet}!E2:E14)"
    summary[f"{col}3"] = f"=INDEX({sheet}!A2:A14,MATCH({col}2,{sheet}!E2:E14,0))"
    summary[f"{col}4"] = f'=COUNTIF({sheet}!E2:E14,"<"&Inputs!$B$3)'
    summary[f"{col}5"] = f"=MAX(0,Inputs!$B$3-{col}2)"
for ws in wb.worksheets:
    for cell in ws[1]:
        cell.font = Font(bold=True)
wb.save(OUT / "cash_forecast.xlsx")

# --- the same model in Python, for summary.csv and the memo ---------------------------------
def forecast(stress: bool):
    closing, closings = assumptions["opening_cash"], []
    for i, row in enumerate(plan):
        if stress:
            receipts = assumptions["stress_collection_rate"] * float(plan[i - 1]["receipts"]) if i else 0.0
        else:
            receipts = float(row["receipts"])
        payments = float(row["payroll"]) + float(row["suppliers"]) + float(row["rent_and_other"])
        closing += receipts - payments
        closings.append(closing)
    low = min(closings)
    return {"min_closing_cash": low, "min_week": closings.index(low) + 1,
            "weeks_below_buffer": sum(c < assumptions["minimum_buffer"] for c in closings),
            "funding_need": max(0.0, assumptions["minimum_buffer"] - low)}


cases = {"base": forecast(False), "stress": forecast(True)}
with open(OUT / "summary.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["case", "min_closing_cash", "min_week", "weeks_below_buffer", "funding_need"])
    for case, v in cases.items():
        writer.writerow([case, f"{v['min_closing_cash']:.2f}", v["min_week"], v["weeks_below_buffer"],
                         f"{v['funding_need']:.2f}"])

need = cases["stress"]["funding_need"]
if need <= 0:
    decision, action = "NO DRAW", "No draw on the revolving credit facility is needed."
elif need <= assumptions["revolver_limit"]:
    decision, action = "DRAW", (f"Draw {need:,.2f} on the revolving credit facility before week "
                                f"{cases['stress']['min_week']} to hold the {assumptions['minimum_buffer']:,.2f} buffer.")
else:
    decision, action = "ESCALATE", "The stress funding need exceeds the facility: escalate to the board."

pdf = canvas.Canvas(str(OUT / "cfo_memo.pdf"), pagesize=A4)
y = 800
for size, text in [(14, "Memo to the CFO: 13-week cash forecast"),
                   (10, f"Opening cash {assumptions['opening_cash']:,.2f}; minimum buffer {assumptions['minimum_buffer']:,.2f}."),
                   (10, f"Base case: minimum closing cash {cases['base']['min_closing_cash']:,.2f} in week "
                        f"{cases['base']['min_week']}; {cases['base']['weeks_below_buffer']} weeks below the buffer."),
                   (10, f"Stress case: minimum closing cash {cases['stress']['min_closing_cash']:,.2f} in week "
                        f"{cases['stress']['min_week']}; {cases['stress']['weeks_below_buffer']} weeks below the buffer."),
                   (10, f"Stress funding need: {need:,.2f} (facility limit {assumptions['revolver_limit']:,.2f})."),
                   (12, f"Recommendation: {decision}"),
                   (10, action)]:
    pdf.setFont("Helvetica-Bold" if size > 10 else "Helvetica", size)
    pdf.drawString(56, y, text)
    y -= 24
pdf.showPage()
pdf.save()
print(f"wrote {OUT}: cash_forecast.xlsx, summary.csv, cfo_memo.pdf ({decision})")
