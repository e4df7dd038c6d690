#!/bin/bash
# Reference: write the SLA-breach query with the support team's answers (read from answers.json,
# the only place they are written down).
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


LABELS = ("urgent", "high", "normal", "low")
targets = dict(parse(r"(\w+): (\d+) minutes", part) for part in answers["B1"].split("; "))
assert sorted(targets) == sorted(LABELS), targets
_, *numbers = parse(r"the (data dictionary|request) is right: (\d+) = urgent, (\d+) = high, (\d+) = normal, "
                    r"(\d+) = low", answers["B2"])
label_of = dict(zip(map(int, numbers), LABELS))
(human,) = parse(r"the first message from (a support agent) \(author_type agent\); bot auto-replies do not count"
                 r"|the first message from anyone but the customer, bot auto-replies included", answers["B3"])
responders = "('agent')" if human else "('agent', 'bot')"
(internal,) = parse(r"leave out tickets of (internal) customers \(tier internal\): they are test tickets"
                    r"|none: every ticket counts", answers["B4"])

label_case = " ".join(f"WHEN {n} THEN '{label}'" for n, label in sorted(label_of.items()))
target_case = " ".join(f"WHEN '{label}' THEN {int(targets[label])}" for label in LABELS)
exclude = "WHERE c.tier <> 'internal'" if internal else ""
Path("/app/queries/sla_breaches.sql").write_text(f"""-- Tickets whose first response came later than their priority's target.
WITH first_response AS (
    SELECT ticket_id, MIN(sent_at) AS first_response_at
    FROM messages
    WHERE author_type IN {responders}
    GROUP BY ticket_id
),
answered AS (
    SELECT t.id AS ticket_id, c.name AS customer,
           CASE t.priority {label_case} END AS priority,
           t.created_at, f.first_response_at,
           CAST(round((julianday(f.first_response_at) - julianday(t.created_at)) * 1440) AS INTEGER) AS response_minutes
    FROM tickets t
    JOIN customers c ON c.id = t.customer_id
    JOIN first_response f ON f.ticket_id = t.id
    {exclude}
)
SELECT ticket_id, customer, priority, created_at, first_response_at, response_minutes
FROM answered
WHERE response_minutes > CASE priority {target_case} END
ORDER BY ticket_id;
""")
PY
cat /app/queries/sla_breaches.sql
