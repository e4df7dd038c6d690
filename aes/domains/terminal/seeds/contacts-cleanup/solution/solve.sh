#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import csv
import json
import re

def phone(text):
    digits = re.sub(r"\D", "", text)
    if len(digits) == 11 and digits.startswith("1"):
        digits = digits[1:]
    return f"({digits[:3]}) {digits[3:6]}-{digits[6:]}" if len(digits) == 10 else ""

with open("/app/data/contacts.csv", newline="") as f:
    rows = list(csv.DictReader(f))
kept, dropped = {}, 0
for row in rows:
    email = row["email"].strip().lower()
    if not email:
        dropped += 1
        continue
    if email in kept:
        continue
    name = " ".join(word.capitalize() for word in row["name"].split())
    kept[email] = {"name": name, "email": email, "phone": phone(row["phone"])}
out = sorted(kept.values(), key=lambda r: r["email"])
with open("/app/data/contacts_clean.csv", "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=["name", "email", "phone"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(out)
summary = {"input_rows": len(rows), "dropped_no_email": dropped,
           "duplicates_removed": len(rows) - dropped - len(out), "output_rows": len(out)}
with open("/app/data/summary.json", "w") as f:
    json.dump(summary, f, indent=2)
PY
