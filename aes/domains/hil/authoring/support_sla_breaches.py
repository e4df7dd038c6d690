"""Authoring script for hil/support-sla-breaches: helpdesk databases (image + hidden variant) and
the expected breach report under the true answers, computed in Python."""
import json, random, sys
from datetime import datetime, timedelta
from pathlib import Path

T = Path(sys.argv[1])
TARGETS = {"urgent": 30, "high": 120, "normal": 480, "low": 1440}
LABELS = {4: "urgent", 3: "high", 2: "normal", 1: "low"}            # the data dictionary's
HUMAN_ONLY, EXCLUDE_INTERNAL = True, True
SUBJECTS = ["Cannot log in", "Invoice total looks wrong", "Export stuck at 99%", "API returns 500",
            "How do I add a user?", "Password reset e-mail never arrives", "Webhook retries", "Feature request: dark mode",
            "Data missing after import", "SSO setup", "Slow dashboard", "Refund request"]
START = datetime(2026, 3, 2, 8, 0)


def build(seed, n_customers, n_tickets):
    rng = random.Random(seed)
    customers = [(i, f"Customer {chr(64 + i)}{rng.randint(10, 99)}", tier)
                 for i, tier in enumerate(["internal", "internal"] + [rng.choice(["standard", "standard", "premium"])
                                                                       for _ in range(n_customers - 2)], start=1)]
    tickets, messages = [], []
    mid = 1
    for tid in range(1001, 1001 + n_tickets):
        cust = rng.randint(1, n_customers)
        prio = rng.randint(1, 4)
        created = START + timedelta(minutes=rng.randint(0, 7 * 24 * 60))
        tickets.append((tid, cust, rng.choice(SUBJECTS), prio, rng.choice(["email", "web", "chat"]),
                        created.isoformat(sep=" "), rng.choice(["open", "pending", "solved", "solved"])))
        msgs = [("customer", f"user@c{cust}.example", created)]
        if rng.random() < 0.6:
            msgs.append(("bot", "autoresponder", created + timedelta(minutes=rng.randint(0, 2))))
        if rng.random() < 0.9:
            # around one of the possible targets, often right at its edge
            target = rng.choice([30, 60, 120, 240, 480, 1440, 2880])
            delay = max(1, target + rng.choice([-1, 0, 1, 1, 2, -5, 10, 45, -20, 300]))
            agent_at = created + timedelta(minutes=delay)
            msgs.append(("agent", rng.choice(["ana@support", "ben@support", "chi@support"]), agent_at))
            if rng.random() < 0.4:
                msgs.append(("customer", f"user@c{cust}.example", agent_at + timedelta(minutes=rng.randint(1, 90))))
                msgs.append(("agent", "ana@support", agent_at + timedelta(minutes=rng.randint(91, 300))))
        for kind, author, at in msgs:
            messages.append((mid, tid, kind, author, at.isoformat(sep=" "))); mid += 1
    rng.shuffle(messages)
    return customers, tickets, messages


def sql(customers, tickets, messages):
    q = lambda v: str(v) if isinstance(v, int) else "'" + v.replace("'", "''") + "'"
    out = ["BEGIN;",
           "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, tier TEXT NOT NULL);",
           "CREATE TABLE tickets (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), subject TEXT NOT NULL, "
           "priority INTEGER NOT NULL, channel TEXT NOT NULL, created_at TEXT NOT NULL, status TEXT NOT NULL);",
           "CREATE TABLE messages (id INTEGER PRIMARY KEY, ticket_id INTEGER NOT NULL REFERENCES tickets(id), author_type TEXT NOT NULL, "
           "author TEXT NOT NULL, sent_at TEXT NOT NULL);"]
    for table, rows in (("customers", customers), ("tickets", tickets), ("messages", messages)):
        out += [f"INSERT INTO {table} VALUES ({', '.join(q(v) for v in r)});" for r in rows]
    return "\n".join(out + ["COMMIT;"]) + "\n"


def first_responses(messages, human_only=HUMAN_ONLY):
    first = {}
    for _, tid, kind, _, at in messages:
        if kind == "agent" or (kind == "bot" and not human_only):
            first[tid] = min(first.get(tid, at), at)
    return first


def report(customers, tickets, messages, targets=TARGETS, labels=LABELS, human_only=HUMAN_ONLY, exclude_internal=EXCLUDE_INTERNAL):
    tier = {c[0]: c[2] for c in customers}
    name = {c[0]: c[1] for c in customers}
    first = first_responses(messages, human_only)
    rows = []
    for tid, cust, _, prio, _, created, _ in sorted(tickets):
        if tid not in first or (exclude_internal and tier[cust] == "internal"):
            continue
        minutes = int((datetime.fromisoformat(first[tid]) - datetime.fromisoformat(created)).total_seconds() // 60)
        label = labels[prio]
        if minutes > targets[label]:
            rows.append([tid, name[cust], label, created, first[tid], minutes])
    return rows


app = build(5, 14, 90)
variant = build(9, 8, 40)
(T / "environment/db/helpdesk.sql").write_text(sql(*app))
(T / "tests/variant.sql").write_text(sql(*variant))
exp = {"columns": ["ticket_id", "customer", "priority", "created_at", "first_response_at", "response_minutes"],
       "app": report(*app), "variant": report(*variant),
       "first_response": {str(k): v for k, v in first_responses(app[2]).items()},
       "priority": {str(t[0]): LABELS[t[3]] for t in app[1]},
       "internal_customers": sorted(c[1] for c in app[0] if c[2] == "internal")}
(T / "tests/expected.json").write_text(json.dumps(exp) + "\n")
print(len(exp["app"]), "breaches;", len(exp["variant"]), "in the variant")
flip = {1: "urgent", 2: "high", 3: "normal", 4: "low"}
print("request mapping:", len(report(*app, labels=flip)), " bots count:", len(report(*app, human_only=False)),
      " internal kept:", len(report(*app, exclude_internal=False)))
internal = {c[0] for c in app[0] if c[2] == "internal"}
print("internal breaches (if kept):", sum(1 for r in report(*app, exclude_internal=False) if r[1] in exp["internal_customers"]))
