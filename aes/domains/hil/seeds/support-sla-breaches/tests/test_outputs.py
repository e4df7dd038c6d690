"""Runs /app/queries/sla_breaches.sql on the shipped database and on a second database with the
same schema; each test is one part of the reward. expected.json follows the support team's answers."""

import json
import sqlite3
from pathlib import Path

import pytest

HERE = Path(__file__).parent
EXPECTED = json.loads((HERE / "expected.json").read_text())
QUERY = Path("/app/queries/sla_breaches.sql")


def run(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        cur = con.execute(QUERY.read_text())
        return [d[0] for d in cur.description], [list(r) for r in cur.fetchall()]
    finally:
        con.close()


@pytest.fixture(scope="module")
def app():
    assert QUERY.is_file(), "no query at /app/queries/sla_breaches.sql"
    return run("/app/helpdesk.db")


@pytest.fixture(scope="module")
def variant(tmp_path_factory):
    db = tmp_path_factory.mktemp("db") / "variant.db"
    con = sqlite3.connect(db)
    con.executescript((HERE / "variant.sql").read_text())
    con.close()
    assert QUERY.is_file(), "no query at /app/queries/sla_breaches.sql"
    return run(db)


def test_columns(app):
    assert app[0] == EXPECTED["columns"]


def test_first_response_times(app):
    rows = app[1]
    assert rows
    first = EXPECTED["first_response"]
    assert [[r[0], r[4]] for r in rows] == [[r[0], first.get(str(r[0]))] for r in rows]


def test_priority_names(app):
    rows = app[1]
    assert rows
    assert [[r[0], r[2]] for r in rows] == [[r[0], EXPECTED["priority"][str(r[0])]] for r in rows]


def test_internal_test_tickets_left_out(app):
    rows = app[1]
    assert rows
    assert not [r for r in rows if r[1] in EXPECTED["internal_customers"]]


def test_breached_tickets(app):
    assert [r[0] for r in app[1]] == [r[0] for r in EXPECTED["app"]]


def test_whole_report(app):
    assert app[1] == EXPECTED["app"]


def test_query_on_another_database(variant):
    assert variant == (EXPECTED["columns"], EXPECTED["variant"])
