"""Runs /app/queries/quarterly_revenue.sql on the shipped database and on a second database with
the same schema; each test is one part of the reward. expected.json follows finance's answers."""

import json
import sqlite3
from pathlib import Path

import pytest

HERE = Path(__file__).parent
EXPECTED = json.loads((HERE / "expected.json").read_text())
QUERY = Path("/app/queries/quarterly_revenue.sql")


def run(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        cur = con.execute(QUERY.read_text())
        return [d[0] for d in cur.description], [list(r) for r in cur.fetchall()]
    finally:
        con.close()


@pytest.fixture(scope="module")
def app():
    assert QUERY.is_file(), "no query at /app/queries/quarterly_revenue.sql"
    return run("/app/sales.db")


@pytest.fixture(scope="module")
def variant(tmp_path_factory):
    db = tmp_path_factory.mktemp("db") / "variant.db"
    con = sqlite3.connect(db)
    con.executescript((HERE / "variant.sql").read_text())
    con.close()
    assert QUERY.is_file(), "no query at /app/queries/quarterly_revenue.sql"
    return run(db)


def totals(rows, index):
    out = {}
    for row in rows:
        out[row[index]] = out.get(row[index], 0) + (row[2] or 0)
    return out


def test_columns(app):
    assert app[0] == EXPECTED["columns"]


def test_region_quarter_rows(app):
    assert [r[:2] for r in app[1]] == [r[:2] for r in EXPECTED["app"]]


def test_quarter_totals(app):
    assert totals(app[1], 1) == totals(EXPECTED["app"], 1)


def test_region_totals(app):
    assert totals(app[1], 0) == totals(EXPECTED["app"], 0)


def test_whole_result(app):
    assert app[1] == EXPECTED["app"]


def test_query_on_another_database(variant):
    assert variant == (EXPECTED["columns"], EXPECTED["variant"])
