"""Create the catalog's database (run once, at image build)."""
import json
import os
import sqlite3

HERE = os.path.dirname(os.path.abspath(__file__))
DB = os.path.join(HERE, "state.db")
PRODUCTS = [
    ("SKU-1001", "Oat drink 1 L", "NordOat", "active", 249),
    ("SKU-1002", "Oat drink barista 1 L", "NordOat", "active", 319),
    ("SKU-1003", "Oat cream 250 ml", "NordOat", "discontinued", 199),
    ("SKU-1004", "Oat yoghurt 500 g", "NordOat", "active", 289),
    ("SKU-1005", "Oat bar 40 g", "NordOat", "active", 149),
    ("SKU-2001", "Soy drink 1 L", "SoyCo", "active", 229),
    ("SKU-2002", "Soy dessert 4 x 125 g", "SoyCo", "active", 259),
]
NOTICES = [
    ("PN-30", "SoyCo", "applied", [{"sku": "SKU-2001", "new_price_cents": 229}]),
    ("PN-31", "NordOat", "pending", [{"sku": "SKU-1001", "new_price_cents": 279},
                                     {"sku": "SKU-1002", "new_price_cents": 339},
                                     {"sku": "SKU-1003", "new_price_cents": 219},
                                     {"sku": "SKU-1004", "new_price_cents": 299}]),
]
if os.path.exists(DB):
    os.remove(DB)
con = sqlite3.connect(DB)
con.executescript("""
CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT NOT NULL, supplier TEXT NOT NULL, status TEXT NOT NULL,
                       price_cents INTEGER NOT NULL);
CREATE TABLE notices (id TEXT PRIMARY KEY, supplier TEXT NOT NULL, status TEXT NOT NULL, lines TEXT NOT NULL);
CREATE TABLE audit (seq INTEGER PRIMARY KEY, action TEXT NOT NULL, target TEXT NOT NULL, detail TEXT NOT NULL);
""")
con.executemany("INSERT INTO products VALUES (?, ?, ?, ?, ?)", PRODUCTS)
con.executemany("INSERT INTO notices VALUES (?, ?, ?, ?)", [(i, s, st, json.dumps(l)) for i, s, st, l in NOTICES])
con.execute("INSERT INTO audit VALUES (1, 'update_price', 'SKU-2001', '229 PN-30')")
con.execute("INSERT INTO audit VALUES (2, 'mark_notice_applied', 'PN-30', 'applied')")
con.commit()
con.close()
