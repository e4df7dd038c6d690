"""Checks /app/answers.json and the view and index in /app/shop.db; each test is one part of the reward."""

import json
import sqlite3
from pathlib import Path

import pytest

CUSTOMER_REVENUE = [
    (1, "Ava Ekman", 56115), (2, "Ben Costa", 78310), (3, "Chloe Haas", 6960), (4, "Dmitri Ekman", 0),
    (5, "Elif Fabre", 25160), (6, "Femi Costa", 19790), (7, "Gita Fabre", 56340), (8, "Hugo Ekman", 70740),
    (9, "Ines Ekman", 58640), (10, "Jonas Fabre", 98966), (11, "Kaia Fabre", 50070), (12, "Luca Dahl", 17586),
    (13, "Maya Fabre", 0), (14, "Nils Dahl", 6960), (15, "Olga Fabre", 14220), (16, "Pedro Berg", 44350),
    (17, "Quinn Giles", 0), (18, "Rosa Ekman", 18792), (19, "Sami Giles", 24041), (20, "Tara Berg", 57814),
]


@pytest.fixture(scope="module")
def answers():
    return json.loads(Path("/app/answers.json").read_text())


@pytest.fixture
def db():
    con = sqlite3.connect("file:/app/shop.db?mode=ro", uri=True)
    yield con
    con.close()


def test_paid_revenue(answers):
    assert answers["paid_revenue_cents"] == 704854


def test_top_customer(answers):
    assert answers["top_customer"] == "Jonas Fabre"


def test_revenue_by_month(answers):
    assert answers["revenue_by_month"] == {"2026-01": 220583, "2026-02": 277265, "2026-03": 207006}


def test_never_ordered(answers):
    assert answers["never_ordered"] == ["Bookend", "Luggage tag"]


def test_customers_without_orders(answers):
    assert answers["customers_without_orders"] == 3


def test_customer_revenue_view(db):
    assert db.execute("SELECT type FROM sqlite_master WHERE name = 'customer_revenue'").fetchone() == ("view",)
    rows = db.execute("SELECT customer_id, name, paid_revenue_cents FROM customer_revenue ORDER BY customer_id")
    assert [tuple(r) for r in rows] == CUSTOMER_REVENUE


def test_orders_customer_index(db):
    row = db.execute("SELECT tbl_name FROM sqlite_master WHERE type = 'index' AND name = 'idx_orders_customer_id'").fetchone()
    assert row == ("orders",)
    columns = [r[2] for r in db.execute("PRAGMA index_info('idx_orders_customer_id')")]
    assert columns == ["customer_id"]
