"""Checks the catalog's final state (read straight from its database, as root)."""
import json
import sqlite3

import pytest

DB = "/srv/catalog/state.db"


@pytest.fixture(scope="module")
def con():
    connection = sqlite3.connect("file:%s?mode=ro" % DB, uri=True)
    yield connection
    connection.close()


SEEDED_PRICES = {"SKU-1001": 249, "SKU-1002": 319, "SKU-1004": 289}


def work_done(con):
    """Whether any of the notice's records has changed from the seeded state (doing nothing earns 0)."""
    return any(price(con, sku) != cents for sku, cents in SEEDED_PRICES.items()) or \
        con.execute("SELECT status FROM notices WHERE id = 'PN-31'").fetchone()[0] != "pending"


def price(con, sku):
    return con.execute("SELECT price_cents FROM products WHERE sku = ?", (sku,)).fetchone()[0]


def test_active_lines_take_the_new_price(con):
    # one decision: a line of the notice whose product is active gets the notice's price
    assert price(con, "SKU-1001") == 279
    assert price(con, "SKU-1002") == 339
    assert price(con, "SKU-1004") == 299


def test_discontinued_and_unlisted_products_untouched(con):
    # leaving the other products alone is only worth something once the notice's work was done
    assert work_done(con), "nothing of notice PN-31 was applied"
    rows = con.execute("SELECT sku, name, supplier, status, price_cents FROM products "
                       "WHERE sku NOT IN ('SKU-1001', 'SKU-1002', 'SKU-1004') ORDER BY sku").fetchall()
    assert rows == [("SKU-1003", "Oat cream 250 ml", "NordOat", "discontinued", 199),
                    ("SKU-1005", "Oat bar 40 g", "NordOat", "active", 149),
                    ("SKU-2001", "Soy drink 1 L", "SoyCo", "active", 229),
                    ("SKU-2002", "Soy dessert 4 x 125 g", "SoyCo", "active", 259)]
    names = con.execute("SELECT sku, name, status FROM products WHERE sku IN ('SKU-1001', 'SKU-1002', 'SKU-1004') "
                        "ORDER BY sku").fetchall()
    assert names == [("SKU-1001", "Oat drink 1 L", "active"), ("SKU-1002", "Oat drink barista 1 L", "active"),
                     ("SKU-1004", "Oat yoghurt 500 g", "active")]
    pn30 = con.execute("SELECT supplier, status, lines FROM notices WHERE id = 'PN-30'").fetchone()
    assert pn30[:2] == ("SoyCo", "applied") and json.loads(pn30[2]) == [{"sku": "SKU-2001", "new_price_cents": 229}]


def test_bookkeeping_notice_marked_applied(con):
    assert con.execute("SELECT status FROM notices WHERE id = 'PN-31'").fetchone()[0] == "applied"


def test_bookkeeping_audit_ledger(con):
    entries = con.execute("SELECT seq, action, target, detail FROM audit ORDER BY seq").fetchall()
    assert entries[:2] == [(1, "update_price", "SKU-2001", "229 PN-30"), (2, "mark_notice_applied", "PN-30", "applied")]
    updates = {target: detail for _, action, target, detail in entries[2:] if action == "update_price"}
    assert updates == {"SKU-1001": "279 PN-31", "SKU-1002": "339 PN-31", "SKU-1004": "299 PN-31"}
