"""Checks the order desk's saved state after Ada Okonkwo's refund request (message 2) was handled
(the database is root-only: the solver can change it only through the application).

Every test first requires an issued refund on order NW-5531 that was not there at the start, so an
untouched desk scores 0.
"""

import json
import os
import sqlite3
from pathlib import Path

import pytest

DB = os.environ.get("APP_DB", "/srv/desk/app.db")
SEEDED = json.loads((Path(__file__).parent / "seeded.json").read_text())
OLD = {r["id"] for r in SEEDED["refunds"]}


@pytest.fixture(scope="module")
def db():
    conn = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def issued(db):
    new = [dict(r) for r in db.execute("SELECT * FROM refunds WHERE order_id = 'NW-5531' ORDER BY id")
           if r["id"] not in OLD]
    done = [r for r in new if r["status"] == "issued"]
    assert done, "no refund was issued on NW-5531"
    return done, new


def test_exactly_one_refund_issued_nothing_left_open(issued):
    done, new = issued
    assert len(done) == 1, f"{len(done)} refunds issued on NW-5531"
    assert all(r["status"] in ("issued", "cancelled") for r in new), "a refund on NW-5531 was left half-way"


def test_only_the_two_lanterns(db, issued):
    lines = [dict(r) for r in db.execute("SELECT line, quantity FROM refund_lines WHERE refund_id = ?",
                                         (issued[0][0]["id"],))]
    assert lines == [{"line": 2, "quantity": 2}], lines


def test_amount(issued):
    assert issued[0][0]["amount_cents"] == 6900


def test_reason_damaged_in_transit(issued):
    assert issued[0][0]["reason"] == "damaged_in_transit"


def test_back_to_the_card(issued):
    assert issued[0][0]["method"] == "original_payment", "the customer asked for her card, not store credit"


def test_bookkeeping_went_through_the_confirmation_step(db, issued):
    actions = [r["action"] for r in db.execute("SELECT action FROM refund_events WHERE refund_id = ? ORDER BY seq",
                                               (issued[0][0]["id"],))]
    assert actions == ["draft_created", "method_chosen", "issued"], actions


def test_bookkeeping_other_orders_and_refunds_untouched(db, issued):
    for table, key in (("orders", "id"), ("order_lines", "order_id, line"), ("messages", "id")):
        assert [dict(r) for r in db.execute(f"SELECT * FROM {table} ORDER BY {key}")] == SEEDED[table], table
    assert [dict(r) for r in db.execute("SELECT * FROM refunds ORDER BY id") if r["id"] in OLD] == SEEDED["refunds"]
    assert not [r for r in db.execute("SELECT * FROM refunds") if r["id"] not in OLD and r["order_id"] != "NW-5531"]
    assert [dict(r) for r in db.execute("SELECT * FROM refund_lines ORDER BY refund_id, line")
            if r["refund_id"] in OLD] == SEEDED["refund_lines"]
