"""Print the catalog's whole state as one JSON object: {collection: {record id: record}}."""
import json
import os
import sqlite3

con = sqlite3.connect("file:%s?mode=ro" % os.path.join(os.path.dirname(os.path.abspath(__file__)), "state.db"),
                      uri=True)
con.row_factory = sqlite3.Row
print(json.dumps({
    "products": {r["sku"]: dict(r) for r in con.execute("SELECT * FROM products")},
    "notices": {r["id"]: dict(r) for r in con.execute("SELECT * FROM notices")},
    "audit": {str(r["seq"]): dict(r) for r in con.execute("SELECT * FROM audit")},
}, sort_keys=True))
