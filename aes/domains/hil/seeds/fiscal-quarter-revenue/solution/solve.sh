#!/bin/bash
# Reference: write the quarterly revenue query with finance's answers (read from answers.json,
# the only place they are written down).
set -euo pipefail
python3 - <<'PY'
import json
import re
from datetime import date
from pathlib import Path

answers = json.loads(Path("/solution/answers.json").read_text())
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


def parse(pattern, text):
    match = re.fullmatch(pattern, text)
    if not match:
        raise SystemExit(f"cannot read the answer {text!r}")
    return match.groups()


start, end, q1_from, q1_to = parse(r"FY2026 runs from (\d{4}-\d\d-01) to (\d{4}-\d\d-\d\d); Q1 is (\w+) to (\w+)",
                                   answers["B1"])
start = date.fromisoformat(start)
assert date.fromisoformat(end).toordinal() - start.toordinal() in (364, 365), answers["B1"]
assert MONTHS.index(q1_from) == start.month - 1 and MONTHS.index(q1_to) == (start.month + 1) % 12, answers["B1"]
REVENUE = {"gross_cents minus discount_cents; tax_cents is not revenue": "o.gross_cents - o.discount_cents",
           "gross_cents as it is; discounts and tax_cents are ignored": "o.gross_cents",
           "gross_cents minus discount_cents plus tax_cents": "o.gross_cents - o.discount_cents + o.tax_cents"}
if answers["B2"] not in REVENUE:
    raise SystemExit(f"cannot read the answer {answers['B2']!r}")
revenue = REVENUE[answers["B2"]]
(shipped,) = parse(r"the (shipping) date \(shipped_at\); orders that have not shipped are left out"
                   r"|the order date \(ordered_at\), shipped or not", answers["B3"])
day = "o.shipped_at" if shipped else "o.ordered_at"
(keep_empty,) = parse(r"(list them) with revenue_cents 0, so the result always has 12 rows"
                      r"|leave those rows out", answers["B4"])

# months since the fiscal year's first month: 0-11 inside FY2026
offset = f"((CAST(strftime('%Y', {day}) AS INTEGER) - {start.year}) * 12 + CAST(strftime('%m', {day}) AS INTEGER) - {start.month})"
join = "LEFT JOIN" if keep_empty else "JOIN"
Path("/app/queries/quarterly_revenue.sql").write_text(f"""-- Revenue per region and fiscal quarter of FY2026.
WITH counted AS (
    SELECT co.region, 'FY2026-Q' || ({offset} / 3 + 1) AS quarter, {revenue} AS revenue
    FROM orders o
    JOIN customers c ON c.id = o.customer_id
    JOIN countries co ON co.code = c.country_code
    WHERE o.status <> 'cancelled' AND {day} IS NOT NULL AND {offset} BETWEEN 0 AND 11
),
grid AS (
    SELECT r.region, q.quarter
    FROM (SELECT DISTINCT region FROM countries) r
    CROSS JOIN (SELECT 'FY2026-Q1' AS quarter UNION ALL SELECT 'FY2026-Q2'
                UNION ALL SELECT 'FY2026-Q3' UNION ALL SELECT 'FY2026-Q4') q
)
SELECT g.region, g.quarter, COALESCE(SUM(c.revenue), 0) AS revenue_cents
FROM grid g
{join} counted c ON c.region = g.region AND c.quarter = g.quarter
GROUP BY g.region, g.quarter
ORDER BY g.quarter, g.region;
""")
PY
cat /app/queries/quarterly_revenue.sql
