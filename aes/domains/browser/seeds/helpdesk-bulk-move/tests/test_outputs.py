"""Checks the helpdesk's saved state after triage request TR-88 (the database is root-only: the solver
can change it only through the application).

Every test first requires a confirmed bulk move (none exists at the start), so an untouched helpdesk
scores 0.
"""

import json
import os
import sqlite3
from pathlib import Path

import pytest

DB = os.environ.get("APP_DB", "/srv/helpdesk/app.db")
SEEDED = json.loads((Path(__file__).parent / "seeded.json").read_text())
TARGETS = ["T-1001", "T-1007", "T-1012", "T-1014"]


@pytest.fixture(scope="module")
def db():
    conn = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def moves(db):
    rows = [dict(r) for r in db.execute("SELECT * FROM bulk_actions ORDER BY seq")]
    assert rows, "no bulk move was confirmed"
    return rows


def test_bookkeeping_one_bulk_move_to_billing(moves):
    assert len(moves) == 1 and moves[0]["queue"] == "Billing", moves


def test_it_moved_exactly_the_open_invoice_tickets_of_lumen_dental(moves):
    assert sorted(json.loads(moves[0]["tickets"])) == TARGETS


def test_bookkeeping_the_note_cites_the_triage_request(moves):
    assert "TR-88" in moves[0]["note"]


def test_the_tickets_are_in_billing(db, moves):
    queues = dict(db.execute("SELECT id, queue FROM tickets WHERE id IN (?, ?, ?, ?)", TARGETS).fetchall())
    assert queues == {t: "Billing" for t in TARGETS}


def test_bookkeeping_the_moved_tickets_are_otherwise_unchanged(db, moves):
    seeded = {t["id"]: t for t in SEEDED["tickets"]}
    for row in db.execute("SELECT * FROM tickets WHERE id IN (?, ?, ?, ?)", TARGETS):
        assert {**dict(row), "queue": seeded[row["id"]]["queue"]} == seeded[row["id"]]


def test_bookkeeping_other_tickets_and_reference_data_untouched(db, moves):
    others = [t for t in SEEDED["tickets"] if t["id"] not in TARGETS]
    assert [dict(r) for r in db.execute("SELECT * FROM tickets ORDER BY id") if r["id"] not in TARGETS] == others
    assert [dict(r) for r in db.execute("SELECT * FROM queues ORDER BY name")] == SEEDED["queues"]
    events = [dict(r) for r in db.execute("SELECT * FROM ticket_events ORDER BY seq")]
    assert events[:len(SEEDED["ticket_events"])] == SEEDED["ticket_events"]
    assert sorted(e["ticket_id"] for e in events[len(SEEDED["ticket_events"]):]) == TARGETS
