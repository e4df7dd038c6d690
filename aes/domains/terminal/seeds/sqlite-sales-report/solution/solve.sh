#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import json
import sqlite3

con = sqlite3.connect("/app/shop.db")
paid_items = """FROM order_items i JOIN orders o ON o.id = i.order_id WHERE o.status = 'paid'"""
con.executescript("""
CREATE VIEW IF NOT EXISTS customer_revenue AS
SELECT c.id AS customer_id, c.name AS name,
       COALESCE(SUM(CASE WHEN o.status = 'paid' THEN i.quantity * i.unit_price_cents END), 0)
           AS paid_revenue_cents
FROM customers c
LEFT JOIN orders o ON o.customer_id = c.id
LEFT JOIN order_items i ON i.order_id = o.id
GROUP BY c.id, c.name;
CREATE INDEX IF NOT EXISTS idx_orders_customer_id ON orders(customer_id);
""")
answers = {
    "paid_revenue_cents": con.execute(f"SELECT SUM(i.quantity * i.unit_price_cents) {paid_items}").fetchone()[0],
    "top_customer": con.execute(
        "SELECT name FROM customer_revenue ORDER BY paid_revenue_cents DESC LIMIT 1").fetchone()[0],
    "revenue_by_month": dict(con.execute(
        f"SELECT substr(o.order_date, 1, 7), SUM(i.quantity * i.unit_price_cents) {paid_items} "
        "GROUP BY 1 ORDER BY 1").fetchall()),
    "never_ordered": [r[0] for r in con.execute(
        "SELECT name FROM products WHERE id NOT IN (SELECT product_id FROM order_items) ORDER BY name")],
    "customers_without_orders": con.execute(
        "SELECT COUNT(*) FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)").fetchone()[0],
}
con.commit()
con.close()
with open("/app/answers.json", "w") as f:
    json.dump(answers, f, indent=2)
PY
