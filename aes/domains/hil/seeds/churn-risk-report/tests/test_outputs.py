"""Runs /app/queries/at_risk.sql on the shipped database and on a second database with the same
schema; each test is one part of the reward. expected.json follows customer success's answers."""

import json
import sqlite3
from pathlib import Path

import pytest

HERE = Path(__file__).parent
EXPECTED = json.loads((HERE / "expected.json").read_text())
QUERY = Path("/app/queries/at_risk.sql")


def run(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        cur = con.execute(QUERY.read_text())
        return [d[0] for d in cur.description], [list(r) for r in cur.fetchall()]
    finally:
        con.close()


@pytest.fixture(scope="module")
def app():
    assert QUERY.is_file(), "no query at /app/queries/at_risk.sql"
    return run("/app/saas.db")


@pytest.fixture(scope="module")
def variant(tmp_path_factory):
    db = tmp_path_factory.mktemp("db") / "variant.db"
    con = sqlite3.connect(db)
    con.executescript((HERE / "variant.sql").read_text())
    con.close()
    assert QUERY.is_file(), "no query at /app/queries/at_risk.sql"
    return run(db)


def test_columns(app):
    assert app[0] == EXPECTED["columns"]


def test_which_customers_are_at_risk(app):
    assert sorted(r[0] for r in app[1]) == sorted(r[0] for r in EXPECTED["app"])


def test_days_inactive(app):
    assert {r[0]: r[4] for r in app[1]} == {r[0]: r[4] for r in EXPECTED["app"]}


def test_row_order(app):
    rows = app[1]
    assert len(rows) > 1
    assert rows == sorted(rows, key=lambda r: (-r[3], r[0]))


def test_whole_report(app):
    assert app[1] == EXPECTED["app"]


def test_query_on_another_database(variant):
    assert variant == (EXPECTED["columns"], EXPECTED["variant"])
