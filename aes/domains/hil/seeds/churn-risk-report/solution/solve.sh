#!/bin/bash
# Reference: write the at-risk query with customer success's answers (read from answers.json,
# the only place they are written down).
set -euo pipefail
python3 - <<'PY'
import json
import re
from pathlib import Path

answers = json.loads(Path("/solution/answers.json").read_text())
COLUMNS = ("customer_id", "name", "plan", "mrr_cents", "days_inactive")


def parse(pattern, text):
    match = re.fullmatch(pattern, text)
    if not match:
        raise SystemExit(f"cannot read the answer {text!r}")
    return match.groups()


paying, _ = parse(r"subscriptions with status (\w+(?: or \w+)*); (\w+(?:(?:, | and )\w+)*) do not count", answers["B1"])
statuses = ", ".join(f"'{s}'" for s in paying.split(" or "))
(days,) = parse(r"more than (\d+) days since the last login", answers["B2"])
signup, null = parse(r"count from the customer's (signup) date, as if they had logged in that day"
                     r"|leave them out of the report|(null): report them with days_inactive NULL", answers["B3"])
never = "signup" if signup else "null" if null else "skip"
order = parse(r"(\w+) (ascending|descending), then (\w+) (ascending|descending)", answers["B4"])
assert order[0] in COLUMNS and order[2] in COLUMNS, order
order_by = f"{order[0]} {'DESC' if order[1] == 'descending' else 'ASC'}, {order[2]} {'DESC' if order[3] == 'descending' else 'ASC'}"

if never == "signup":
    days_expr, keep = "CAST(julianday('2026-06-30') - julianday(COALESCE(l.last_day, c.signup_date)) AS INTEGER)", f"days_inactive > {int(days)}"
elif never == "null":
    days_expr, keep = "CAST(julianday('2026-06-30') - julianday(l.last_day) AS INTEGER)", f"(days_inactive IS NULL OR days_inactive > {int(days)})"
else:
    days_expr, keep = "CAST(julianday('2026-06-30') - julianday(l.last_day) AS INTEGER)", f"days_inactive > {int(days)}"

Path("/app/queries/at_risk.sql").write_text(f"""-- Paying customers nobody has logged in for too long, as of 2026-06-30.
WITH last_login AS (
    SELECT customer_id, MAX(date(logged_in_at)) AS last_day
    FROM logins
    GROUP BY customer_id
),
paying AS (
    SELECT c.id AS customer_id, c.name, s.plan, s.mrr_cents,
           {days_expr} AS days_inactive
    FROM customers c
    JOIN subscriptions s ON s.customer_id = c.id AND s.status IN ({statuses})
    LEFT JOIN last_login l ON l.customer_id = c.id
)
SELECT customer_id, name, plan, mrr_cents, days_inactive
FROM paying
WHERE {keep}
ORDER BY {order_by};
""")
PY
cat /app/queries/at_risk.sql
