"""The product catalog service, as an MCP server over stdio (its state: state.db beside it)."""
import json
import os
import sqlite3
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mcpserver import Server, ToolError  # noqa: E402

DB = os.path.join(HERE, "state.db")
server = Server("catalog", instructions="Product catalog: products, supplier price notices, price updates and "
                                        "the audit ledger. Prices are integer cents.")


def db():
    con = sqlite3.connect(DB)
    con.row_factory = sqlite3.Row
    return con


def product(con, sku):
    row = con.execute("SELECT * FROM products WHERE sku = ?", (sku,)).fetchone()
    if row is None:
        raise ToolError("no product %s" % sku)
    return dict(row)


@server.tool("List supplier price notices (id, supplier, status).")
def list_notices():
    with db() as con:
        return {"notices": [{"notice_id": r["id"], "supplier": r["supplier"], "status": r["status"]}
                            for r in con.execute("SELECT * FROM notices ORDER BY id")]}


@server.tool("One supplier price notice with its lines (sku, new_price_cents).",
             {"notice_id": {"type": "string"}}, required=["notice_id"])
def get_notice(notice_id):
    with db() as con:
        row = con.execute("SELECT * FROM notices WHERE id = ?", (notice_id,)).fetchone()
    if row is None:
        raise ToolError("no notice %s" % notice_id)
    return {"notice_id": row["id"], "supplier": row["supplier"], "status": row["status"],
            "lines": json.loads(row["lines"])}


@server.tool("One product: name, supplier, status (active or discontinued) and price in cents.",
             {"sku": {"type": "string"}}, required=["sku"])
def get_product(sku):
    with db() as con:
        return product(con, sku)


@server.tool("Products, optionally of one supplier.", {"supplier": {"type": "string"}})
def list_products(supplier=None):
    with db() as con:
        rows = con.execute("SELECT * FROM products ORDER BY sku").fetchall()
    return {"products": [dict(r) for r in rows if supplier in (None, r["supplier"])]}


@server.tool("Set a product's price (integer cents); the reason is recorded in the audit ledger.",
             {"sku": {"type": "string"}, "price_cents": {"type": "integer"}, "reason": {"type": "string"}},
             required=["sku", "price_cents", "reason"])
def update_price(sku, price_cents, reason):
    if price_cents <= 0:
        raise ToolError("price_cents must be positive")
    con = db()
    try:
        with con:
            product(con, sku)
            con.execute("UPDATE products SET price_cents = ? WHERE sku = ?", (price_cents, sku))
            con.execute("INSERT INTO audit (action, target, detail) VALUES ('update_price', ?, ?)",
                        (sku, "%d %s" % (price_cents, reason)))
    finally:
        con.close()
    return {"sku": sku, "price_cents": price_cents}


@server.tool("Mark a pending price notice as applied.", {"notice_id": {"type": "string"}}, required=["notice_id"])
def mark_notice_applied(notice_id):
    con = db()
    try:
        with con:
            row = con.execute("SELECT status FROM notices WHERE id = ?", (notice_id,)).fetchone()
            if row is None:
                raise ToolError("no notice %s" % notice_id)
            if row["status"] != "pending":
                raise ToolError("notice %s is already %s" % (notice_id, row["status"]))
            con.execute("UPDATE notices SET status = 'applied' WHERE id = ?", (notice_id,))
            con.execute("INSERT INTO audit (action, target, detail) VALUES ('mark_notice_applied', ?, 'applied')",
                        (notice_id,))
    finally:
        con.close()
    return {"notice_id": notice_id, "status": "applied"}


@server.tool("The audit ledger: every write, oldest first.")
def get_audit_log():
    with db() as con:
        return {"entries": [dict(r) for r in con.execute("SELECT * FROM audit ORDER BY seq")]}


if __name__ == "__main__":
    server.serve()
