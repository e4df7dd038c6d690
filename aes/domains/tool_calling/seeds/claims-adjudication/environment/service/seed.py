"""Create the service's database from data.json (run once, at image build)."""
import json
import os
import sqlite3

HERE = os.path.dirname(os.path.abspath(__file__))
DB = os.path.join(HERE, "state.db")

data = json.load(open(os.path.join(HERE, "data.json")))
if os.path.exists(DB):
    os.remove(DB)
con = sqlite3.connect(DB)
con.executescript("""
CREATE TABLE guide (id TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE plans (plan TEXT NOT NULL, category TEXT NOT NULL, annual_limit_cents INTEGER NOT NULL,
                    PRIMARY KEY (plan, category));
CREATE TABLE policies (id TEXT PRIMARY KEY, holder TEXT NOT NULL, plan TEXT NOT NULL, start_date TEXT NOT NULL,
                       end_date TEXT NOT NULL, cancelled_on TEXT, deductible_cents INTEGER NOT NULL);
CREATE TABLE batches (id TEXT PRIMARY KEY, status TEXT NOT NULL);
CREATE TABLE claims (id TEXT PRIMARY KEY, batch_id TEXT NOT NULL, policy_id TEXT NOT NULL, category TEXT NOT NULL,
                     incident_date TEXT NOT NULL, reported_date TEXT NOT NULL, amount_cents INTEGER NOT NULL,
                     decision TEXT, reason TEXT, payout_cents INTEGER);
CREATE TABLE audit (seq INTEGER PRIMARY KEY, action TEXT NOT NULL, target TEXT NOT NULL, detail TEXT NOT NULL);
""")
guide = data["guide"]
con.execute("INSERT INTO guide VALUES (?, ?)", (guide["guide_id"], json.dumps(guide, sort_keys=True)))
for plan, limits in sorted(data["plans"].items()):
    for category, limit in sorted(limits.items()):
        con.execute("INSERT INTO plans VALUES (?, ?, ?)", (plan, category, limit))
for p in data["policies"]:
    con.execute("INSERT INTO policies VALUES (?, ?, ?, ?, ?, ?, ?)",
                (p["id"], p["holder"], p["plan"], p["start"], p["end"], p["cancelled_on"], p["deductible"]))
for b in data["batches"]:
    con.execute("INSERT INTO batches VALUES (?, ?)", (b["id"], b["status"]))
audit = []
for c in data["claims"]:
    decision, reason, payout = c.get("decided") or (None, None, None)
    con.execute("INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (c["id"], "B-" + c["id"].split("-")[1], c["policy"], c["category"], c["incident"], c["reported"],
                 c["amount"], decision, reason, payout))
    if decision:
        audit.append(("adjudicate_claim", c["id"], "%s %s %d" % (decision, reason, payout)))
audit += [("close_batch", b["id"], "closed") for b in data["batches"] if b["status"] == "closed"]
for seq, (action, target, detail) in enumerate(audit, 1):
    con.execute("INSERT INTO audit VALUES (?, ?, ?, ?)", (seq, action, target, detail))
con.commit()
con.close()
