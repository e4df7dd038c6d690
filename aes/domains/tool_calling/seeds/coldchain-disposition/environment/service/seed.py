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
CREATE TABLE policy (id TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE consignments (id TEXT PRIMARY KEY, customer TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE shipments (id TEXT PRIMARY KEY, consignment_id TEXT NOT NULL, product TEXT NOT NULL,
                        interval_minutes INTEGER NOT NULL, disposition TEXT, reason TEXT);
CREATE TABLE readings (shipment_id TEXT NOT NULL, seq INTEGER NOT NULL, temp_c REAL NOT NULL, flag TEXT,
                       PRIMARY KEY (shipment_id, seq));
CREATE TABLE audit (seq INTEGER PRIMARY KEY, action TEXT NOT NULL, target TEXT NOT NULL, detail TEXT NOT NULL);
""")
policy = data["policy"]
con.execute("INSERT INTO policy VALUES (?, ?)", (policy["policy_id"], json.dumps(policy, sort_keys=True)))
for c in data["consignments"]:
    con.execute("INSERT INTO consignments VALUES (?, ?, ?)", (c["id"], c["customer"], c["status"]))
for s in data["shipments"]:
    decision, reason = s.get("disposition") or (None, None)
    con.execute("INSERT INTO shipments VALUES (?, ?, ?, ?, ?, ?)",
                (s["id"], s["consignment"], s["product"], s["interval"], decision, reason))
    for seq, reading in enumerate(s["readings"], 1):
        con.execute("INSERT INTO readings VALUES (?, ?, ?, ?)",
                    (s["id"], seq, reading[0], reading[1] if len(reading) > 1 else None))
for seq, (action, target, detail) in enumerate(data["audit"], 1):
    con.execute("INSERT INTO audit VALUES (?, ?, ?, ?)", (seq, action, target, detail))
con.commit()
con.close()
