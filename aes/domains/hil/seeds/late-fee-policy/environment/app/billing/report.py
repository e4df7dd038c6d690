"""Writes the late-fee report for an export of open invoices.

    python3 -m billing.report data/open_invoices.csv --as-of 2026-04-30 --out out/late_fees.csv

The export has one row per unpaid invoice: invoice_id, customer, amount_cents, due_date
(YYYY-MM-DD). The report lists the invoices that owe a fee, ordered by invoice_id.
"""

from __future__ import annotations

import argparse
import csv
from datetime import date
from pathlib import Path

from billing.late_fees import late_fee


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export", type=Path)
    parser.add_argument("--as-of", required=True, type=date.fromisoformat)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()

    rows = []
    with args.export.open(newline="") as f:
        for row in csv.DictReader(f):
            due = date.fromisoformat(row["due_date"])
            fee = late_fee(int(row["amount_cents"]), due, args.as_of)
            if fee > 0:
                rows.append([row["invoice_id"], row["customer"], (args.as_of - due).days, fee])
    rows.sort(key=lambda r: r[0])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["invoice_id", "customer", "days_overdue", "fee_cents"])
        writer.writerows(rows)
    print(f"{len(rows)} invoices owe a late fee; total {sum(r[3] for r in rows)} cents")


if __name__ == "__main__":
    main()
