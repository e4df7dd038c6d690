"""Print the service's whole state as one JSON object: {collection: {record id: record}} (sorted)."""
import json
import os
import sqlite3

con = sqlite3.connect("file:%s?mode=ro" % os.path.join(os.path.dirname(os.path.abspath(__file__)), "state.db"),
                      uri=True)
con.row_factory = sqlite3.Row
state = {
    "guide": {r["id"]: json.loads(r["body"]) for r in con.execute("SELECT * FROM guide")},
    "plans": {"%s:%s" % (r["plan"], r["category"]): dict(r) for r in con.execute("SELECT * FROM plans")},
    "policies": {r["id"]: dict(r) for r in con.execute("SELECT * FROM policies")},
    "batches": {r["id"]: dict(r) for r in con.execute("SELECT * FROM batches")},
    "claims": {r["id"]: dict(r) for r in con.execute("SELECT * FROM claims")},
    "audit": {str(r["seq"]): dict(r) for r in con.execute("SELECT * FROM audit")},
}
print(json.dumps(state, sort_keys=True))
