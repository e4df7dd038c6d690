#!/bin/bash
# Reference: implement late_fee() with the billing team's answers (read from answers.json, the
# only place they are written down) and run the April report.
set -euo pipefail
python3 - <<'PY'
import json
import re
from pathlib import Path

answers = json.loads(Path("/solution/answers.json").read_text())


def parse(pattern, text):
    match = re.fullmatch(pattern, text)
    if not match:
        raise SystemExit(f"cannot read the answer {text!r}")
    return match.groups()


(rate,) = parse(r"(\d+(?:\.\d+)?)% of the invoice amount per month overdue", answers["B1"])
grace, grace_again = parse(r"(\d+) days: no fee while an invoice is (\d+) or fewer days overdue; "
                           r"once past that, the fee counts from the original due date", answers["B2"])
assert grace == grace_again, answers["B2"]
counting, period = parse(r"each (started|complete) (\d+)-day period after the due date counts as a full month",
                         answers["B3"])
flat = parse(r"\$(\d+\.\d\d) per invoice, as in docs/terms\.md \(the \d+(?:\.\d+)?% cap is no longer used\)",
             answers["B4"]) if answers["B4"].startswith("$") else None
percent = None if flat else parse(r"(\d+(?:\.\d+)?)% of the invoice amount, as in the request \(.*\)", answers["B4"])
cap = f'CAP_CENTS = int(Decimal("{flat[0]}") * 100)' if flat else "CAP_CENTS = None"
cap_percent = f'CAP_PERCENT = Decimal("{percent[0]}")' if percent else "CAP_PERCENT = None"

Path("/app/billing/late_fees.py").write_text(f'''"""Late fees on overdue invoices."""

from __future__ import annotations

from datetime import date
from decimal import ROUND_HALF_UP, Decimal

RATE_PERCENT = Decimal("{rate}")       # per month overdue, of the invoice amount, not compounded
GRACE_DAYS = {int(grace)}                  # no fee while at most this many days overdue
PERIOD_DAYS = {int(period)}                # one "month" of lateness
STARTED_PERIODS_COUNT = {counting == "started"}
{cap}
{cap_percent}


def _cents(value: Decimal) -> int:
    return int(value.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def late_fee(amount_cents: int, due: date, as_of: date) -> int:
    """The late fee, in whole cents, owed on an unpaid invoice of ``amount_cents`` that was due
    on ``due``, evaluated on ``as_of``."""
    days = (as_of - due).days
    if days <= GRACE_DAYS:
        return 0
    months = -(-days // PERIOD_DAYS) if STARTED_PERIODS_COUNT else days // PERIOD_DAYS
    fee = _cents(Decimal(amount_cents) * RATE_PERCENT / 100 * months)
    if CAP_CENTS is not None:
        fee = min(fee, CAP_CENTS)
    if CAP_PERCENT is not None:
        fee = min(fee, _cents(Decimal(amount_cents) * CAP_PERCENT / 100))
    return fee
''')
PY
cd /app && python3 -m billing.report data/open_invoices.csv --as-of 2026-04-30 --out out/late_fees.csv
