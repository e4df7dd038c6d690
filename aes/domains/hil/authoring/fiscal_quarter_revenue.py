"""Authoring script for hil/fiscal-quarter-revenue: sales databases (image + hidden variant) and
the expected quarterly revenue under the true answers, computed in Python."""
import json, random, sys
from datetime import date, timedelta
from pathlib import Path

T = Path(sys.argv[1])
FY_START, AMOUNT, BY_SHIP, KEEP_EMPTY = date(2025, 4, 1), "net", True, True
REGIONS = ["AMER", "APAC", "EMEA"]
COUNTRIES = [("US", "United States", "AMER"), ("CA", "Canada", "AMER"), ("BR", "Brazil", "AMER"),
             ("DE", "Germany", "EMEA"), ("FR", "France", "EMEA"), ("GB", "United Kingdom", "EMEA"), ("ZA", "South Africa", "EMEA"),
             ("JP", "Japan", "APAC"), ("AU", "Australia", "APAC"), ("SG", "Singapore", "APAC")]
WORDS = ["North", "Blue", "Iron", "Silver", "Maple", "Harbor", "Summit", "River", "Cedar", "Falcon", "Pioneer", "Atlas"]
KINDS = ["Supplies", "Works", "Trading", "Outfitters", "Systems", "Goods"]


def build(seed, n_customers, n_orders, first, last, apac_from):
    rng = random.Random(seed)
    customers = []
    for cid in range(1, n_customers + 1):
        code = COUNTRIES[cid % len(COUNTRIES)][0]
        customers.append((cid, f"{rng.choice(WORDS)} {rng.choice(KINDS)} {cid}", code))
    region = {c[0]: r for c in COUNTRIES for r in [c[2]]}
    orders = []
    span = (last - first).days
    for oid in range(5001, 5001 + n_orders):
        cust = rng.choice(customers)
        ordered = first + timedelta(days=rng.randint(0, span))
        if region[cust[2]] == "APAC" and ordered < apac_from:
            ordered = apac_from + timedelta(days=rng.randint(0, max(0, (last - apac_from).days)))
        status = rng.choices(["shipped", "pending", "cancelled"], [80, 10, 10])[0]
        if status == "pending" and (last - ordered).days > 20:
            status = "shipped"
        shipped = (ordered + timedelta(days=rng.choice([0, 1, 2, 3, 5, 8, 13]))) if status == "shipped" else None
        if shipped and shipped > last:
            shipped, status = None, "pending"
        gross = rng.randint(20, 900) * 100 + rng.choice([0, 50, 99])
        discount = rng.choice([0, 0, 0, gross // 10, gross // 20, 1500])
        tax = round((gross - discount) * rng.choice([0.0, 0.07, 0.19, 0.2]))
        orders.append((oid, cust[0], ordered.isoformat(), shipped.isoformat() if shipped else None, status, gross, discount, tax))
    return customers, orders


def sql(customers, orders):
    q = lambda v: "NULL" if v is None else (str(v) if isinstance(v, int) else "'" + v.replace("'", "''") + "'")
    out = ["BEGIN;",
           "CREATE TABLE countries (code TEXT PRIMARY KEY, name TEXT NOT NULL, region TEXT NOT NULL);",
           "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country_code TEXT NOT NULL REFERENCES countries(code));",
           "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), ordered_at TEXT NOT NULL, "
           "shipped_at TEXT, status TEXT NOT NULL, gross_cents INTEGER NOT NULL, discount_cents INTEGER NOT NULL, tax_cents INTEGER NOT NULL);"]
    for table, rows in (("countries", COUNTRIES), ("customers", customers), ("orders", orders)):
        out += [f"INSERT INTO {table} VALUES ({', '.join(q(v) for v in r)});" for r in rows]
    return "\n".join(out + ["COMMIT;"]) + "\n"


def quarter_of(d, fy_start):
    months = (d.year - fy_start.year) * 12 + d.month - fy_start.month
    if not 0 <= months < 12:
        return None
    return f"FY2026-Q{months // 3 + 1}"


def report(customers, orders, fy_start=FY_START, amount=AMOUNT, by_ship=BY_SHIP, keep_empty=KEEP_EMPTY):
    region = {c[0]: c[2] for c in COUNTRIES}
    cust_region = {c[0]: region[c[2]] for c in customers}
    totals = {}
    for oid, cid, ordered, shipped, status, gross, discount, tax in orders:
        if status == "cancelled":
            continue
        when = shipped if by_ship else ordered
        if when is None:
            continue
        q = quarter_of(date.fromisoformat(when), fy_start)
        if q is None:
            continue
        value = {"net": gross - discount, "gross": gross, "total": gross - discount + tax}[amount]
        key = (cust_region[cid], q)
        totals[key] = totals.get(key, 0) + value
    quarters = [f"FY2026-Q{i}" for i in range(1, 5)]
    rows = [[r, q, totals.get((r, q), 0)] for q in quarters for r in REGIONS if keep_empty or (r, q) in totals]
    return rows


app = build(31, 36, 420, date(2025, 1, 6), date(2026, 5, 15), date(2025, 10, 1))
variant = build(8, 20, 160, date(2025, 2, 1), date(2026, 4, 20), date(2025, 7, 1))
(T / "environment/db/sales.sql").write_text(sql(*app))
(T / "tests/variant.sql").write_text(sql(*variant))
exp = {"columns": ["region", "quarter", "revenue_cents"], "app": report(*app), "variant": report(*variant)}
(T / "tests/expected.json").write_text(json.dumps(exp) + "\n")
for r in exp["app"]: print(r)
print("variant", exp["variant"])
print("guess:", report(*app, fy_start=date(2026, 1, 1), amount="gross", by_ship=False, keep_empty=False))
