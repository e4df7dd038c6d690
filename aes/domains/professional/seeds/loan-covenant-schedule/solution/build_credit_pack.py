"""Reference solution: the loan model workbook (live formulas), covenants.csv and the credit memo,
all from the read-only inputs in /app/inputs."""

import csv
from pathlib import Path

from openpyxl import Workbook
from openpyxl.styles import Font
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

INPUTS, OUT = Path("/app/inputs"), Path("/app/deliverables")
OUT.mkdir(parents=True, exist_ok=True)
TERMS = ("principal", "annual_rate", "term_months", "min_dscr", "max_leverage")

with open(INPUTS / "loan_terms.csv", newline="") as f:
    terms = {row["name"]: float(row["value"]) for row in csv.DictReader(f)}
with open(INPUTS / "ebitda_forecast.csv", newline="") as f:
    ebitda = [float(row["ebitda"]) for row in csv.DictReader(f)]
months, years = int(terms["term_months"]), len(ebitda)
assert months == 12 * years == 60

# --- the workbook -------------------------------------------------------------------------
wb = Workbook()
inputs = wb.active
inputs.title = "Inputs"
inputs.append(["Term", "Value"])
for name in TERMS:
    inputs.append([name, terms[name]])
inputs["A9"], inputs["B9"] = "Year", "EBITDA"
for y, value in enumerate(ebitda, start=1):
    inputs.cell(9 + y, 1, y)
    inputs.cell(9 + y, 2, value)

schedule = wb.create_sheet("Schedule")
schedule.append(["Month", "Opening balance", "Payment", "Interest", "Principal", "Closing balance"])
rate = "(Inputs!$B$3/12)"
for m in range(1, months + 1):
    r = m + 1
    schedule[f"A{r}"] = m
    schedule[f"B{r}"] = "=Inputs!$B$2" if m == 1 else f"=F{r - 1}"
    schedule[f"C{r}"] = f"=Inputs!$B$2*{rate}/(1-(1+{rate})^(-Inputs!$B$4))"
    schedule[f"D{r}"] = f"=B{r}*{rate}"
    schedule[f"E{r}"] = f"=C{r}-D{r}"
    schedule[f"F{r}"] = f"=B{r}-E{r}"

cov = wb.create_sheet("Covenants")
cov.append(["Year", "EBITDA", "Debt service", "DSCR", "Year-end balance", "Leverage", "DSCR OK", "Leverage OK",
            "Status"])
for y in range(1, years + 1):
    r, first, last = y + 1, 12 * (y - 1) + 2, 12 * y + 1  # the year's rows on Schedule
    cov[f"A{r}"] = f"=Inputs!A{9 + y}"
    cov[f"B{r}"] = f"=Inputs!B{9 + y}"
    cov[f"C{r}"] = f"=SUM(Schedule!C{first}:C{last})"
    cov[f"D{r}"] = f"=B{r}/C{r}"
    cov[f"E{r}"] = f"=Schedule!F{last}"
    cov[f"F{r}"] = f"=E{r}/B{r}"
    cov[f"G{r}"] = f"=D{r}>=Inputs!$B$5"
    cov[f"H{r}"] = f"=F{r}<=Inputs!$B$6"
    cov[f"I{r}"] = f'=IF(AND(G{r},H{r}),"OK","BREACH")'
cov["A8"], cov["B8"] = "Monthly payment", "=Schedule!C2"
cov["A9"], cov["B9"] = "Total interest", f"=SUM(Schedule!D2:D{months + 1})"
cov["A10"], cov["B10"] = "Breach years", f'=COUNTIF(I2:I{years + 1},"BREACH")'
for ws in wb.worksheets:
    for cell in ws[1]:
        cell.font = Font(bold=True)
wb.save(OUT / "loan_model.xlsx")

# --- the same model in Python, for covenants.csv and the memo -------------------------------
r = terms["annual_rate"] / 12
payment = terms["principal"] * r / (1 - (1 + r) ** -months)
balance, interest, year_end = terms["principal"], 0.0, []
for m in range(1, months + 1):
    interest += balance * r
    balance -= payment - balance * r
    if m % 12 == 0:
        year_end.append(balance)
rows = []
for y in range(years):
    service = 12 * payment
    dscr, leverage = ebitda[y] / service, year_end[y] / ebitda[y]
    ok = dscr >= terms["min_dscr"] and leverage <= terms["max_leverage"]
    rows.append({"year": y + 1, "ebitda": ebitda[y], "debt_service": service, "dscr": dscr,
                 "year_end_balance": year_end[y], "leverage": leverage, "status": "OK" if ok else "BREACH"})

with open(OUT / "covenants.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["year", "ebitda", "debt_service", "dscr", "year_end_balance", "leverage", "status"])
    for row in rows:
        writer.writerow([row["year"], f"{row['ebitda']:.2f}", f"{row['debt_service']:.2f}", f"{row['dscr']:.4f}",
                         f"{row['year_end_balance']:.2f}", f"{row['leverage']:.4f}", row["status"]])

breaches = [str(row["year"]) for row in rows if row["status"] == "BREACH"]
decision = "APPROVE" if not breaches else "CONDITIONAL" if len(breaches) == 1 else "DECLINE"
pdf = canvas.Canvas(str(OUT / "credit_memo.pdf"), pagesize=A4)
lines = [(14, "Credit memo: Kestrel Ridge Joinery Ltd, five-year term loan"),
         (10, f"Principal {terms['principal']:,.2f} at {terms['annual_rate']:.2%} over {months} months."),
         (10, f"Monthly payment {payment:,.2f}; total interest over the term {interest:,.2f}."),
         (10, f"Covenants: DSCR at least {terms['min_dscr']:.2f}, leverage at most {terms['max_leverage']:.2f}.")]
for row in rows:
    lines.append((9, f"Year {row['year']}: DSCR {row['dscr']:.2f}, leverage {row['leverage']:.2f}, {row['status']}"))
lines += [(10, f"Breach years: {', '.join(breaches) or 'none'}"), (12, f"Recommendation: {decision}")]
y = 800
for size, text in lines:
    pdf.setFont("Helvetica-Bold" if size > 10 else "Helvetica", size)
    pdf.drawString(50, y, text)
    y -= 22
pdf.showPage()
pdf.save()
print(f"wrote {OUT}: loan_model.xlsx, covenants.csv, credit_memo.pdf ({decision})")
