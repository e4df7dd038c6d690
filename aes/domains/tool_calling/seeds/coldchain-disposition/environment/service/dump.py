"""Print the service's whole state as one JSON object: {collection: {record id: record}} (sorted)."""
import json
import os
import sqlite3

con = sqlite3.connect("file:%s?mode=ro" % os.path.join(os.path.dirname(os.path.abspath(__file__)), "state.db"),
                      uri=True)
con.row_factory = sqlite3.Row
state = {
    "policy": {r["id"]: json.loads(r["body"]) for r in con.execute("SELECT * FROM policy")},
    "consignments": {r["id"]: dict(r) for r in con.execute("SELECT * FROM consignments")},
    "shipments": {r["id"]: dict(r) for r in con.execute("SELECT * FROM shipments")},
    "readings": {"%s#%d" % (r["shipment_id"], r["seq"]): dict(r) for r in con.execute("SELECT * FROM readings")},
    "audit": {str(r["seq"]): dict(r) for r in con.execute("SELECT * FROM audit")},
}
print(json.dumps(state, sort_keys=True))
