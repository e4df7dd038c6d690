"""Authoring script for hil/late-fee-policy: writes the invoice export and the expected values
(an implementation of the true policy independent of the reference solution)."""
import csv, io, json, math, random, sys
from datetime import date, timedelta
from decimal import Decimal, ROUND_HALF_UP
from pathlib import Path

T = Path(sys.argv[1])
AS_OF = date(2026, 4, 30)
RATE, GRACE, PERIOD, CAP = Decimal("1.75"), 10, 30, 4000

def fee(amount, due, as_of, rate=RATE, grace=GRACE, period=PERIOD, cap=CAP):
    days = (as_of - due).days
    if days <= grace:
        return 0
    months = math.ceil(days / period)
    raw = Decimal(amount) * rate / 100 * months
    return min(int(raw.quantize(Decimal(1), rounding=ROUND_HALF_UP)), cap)

rng = random.Random(7)
names = ["Abernathy Tools", "Birchwood Dental", "Calder & Sons", "Dunmore Logistics", "Elm Street Bakery",
         "Fairhaven Clinic", "Granite Peak Ltd", "Harrow Media", "Ironbridge Legal", "Juniper Florists",
         "Kestrel Aviation", "Linden Books", "Marlow Design", "Northgate Motors", "Oakley Farms"]
days_list = [-15, -1, 0, 1, 5, 9, 10, 11, 12, 20, 29, 30, 31, 33, 45, 59, 60, 61, 75, 89, 90, 91, 120, 150, 151, 180, 210, 240]
amounts = [12000, 18000, 20000, 45000, 64000, 96000, 150000, 230000, 300000, 480000, 3500, 7800, 125000, 52000]
rows = []
for i, d in enumerate(days_list):
    amount = amounts[i % len(amounts)] + rng.choice([0, 0, 40, 125, 310])
    rows.append([f"INV-{2026_0300 + 7 * i + rng.randint(0, 5)}", names[i % len(names)], amount, (AS_OF - timedelta(days=d)).isoformat()])
rng.shuffle(rows)
buf = io.StringIO()
w = csv.writer(buf, lineterminator="\n")
w.writerow(["invoice_id", "customer", "amount_cents", "due_date"])
w.writerows(rows)
(T / "environment/app/data/open_invoices.csv").write_text(buf.getvalue())

report = []
for inv, cust, amount, due in sorted(rows):
    f = fee(amount, date.fromisoformat(due), AS_OF)
    if f > 0:
        report.append([inv, cust, (AS_OF - date.fromisoformat(due)).days, f])
buf = io.StringIO()
w = csv.writer(buf, lineterminator="\r\n")  # csv module default, as report.py writes it
w.writerow(["invoice_id", "customer", "days_overdue", "fee_cents"])
w.writerows(report)

def case(amount, days, as_of="2025-11-15"):
    a = date.fromisoformat(as_of)
    due = a - timedelta(days=days)
    return [amount, due.isoformat(), a.isoformat(), fee(amount, due, a)]

cases = {
    "not_yet_due": [case(50000, -30), case(50000, 0), case(1000, -1)],
    "grace_period": [case(50000, 1), case(80000, 7), case(120000, 10, "2026-03-01")],
    "first_month": [case(50000, 11), case(80000, 20), case(20000, 30, "2024-02-29"), case(200, 25)],
    "month_counting": [case(50000, 31), case(50000, 45), case(50000, 60), case(50000, 61), case(200, 75), case(40000, 95)],
    "cap_large_invoice": [case(300000, 15), case(150000, 65), case(90000, 400), case(1000000, 200)],
    "small_invoice_not_capped_at_8_percent": [case(10000, 150), case(20000, 300), case(5000, 365)],
}
expected = {"cases": cases, "report_csv": buf.getvalue(), "report_rows": len(report)}
(T / "tests/expected.json").write_text(json.dumps(expected, indent=1) + "\n")
print(json.dumps(cases, indent=None)); print(buf.getvalue())
