#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import csv, json
from decimal import Decimal

def money(text):
    return Decimal(text.strip().replace("$", "").replace(",", ""))

with open("/app/exports/ledger.csv", newline="") as f:
    ledger = {row["invoice_id"].strip().upper(): money(row["amount"]) for row in csv.DictReader(f)}
with open("/app/exports/bank.csv", newline="") as f:
    bank = {row["reference"].strip().upper(): money(row["value"]) for row in csv.DictReader(f)}

both = sorted(set(ledger) & set(bank))
report = {
    "matched": sum(1 for i in both if ledger[i] == bank[i]),
    "missing_in_bank": sorted(set(ledger) - set(bank)),
    "missing_in_ledger": sorted(set(bank) - set(ledger)),
    "amount_mismatches": [
        {"invoice_id": i, "ledger_amount": f"{ledger[i]:.2f}", "bank_amount": f"{bank[i]:.2f}"}
        for i in both if ledger[i] != bank[i]
    ],
    "ledger_total": f"{sum(ledger.values()):.2f}",
    "bank_total": f"{sum(bank.values()):.2f}",
}
with open("/app/reconciliation.json", "w") as f:
    json.dump(report, f, indent=2)
PY
