"""Checks the console's saved state after case QZ-418 was worked (the database is root-only: the
solver can change it only through the application).

Every test first requires that QZ-418 was saved at least once, so an untouched console scores 0.
"""

import json
import os
import re
import sqlite3
from pathlib import Path

import pytest

DB = os.environ.get("APP_DB", "/srv/console/app.db")
SEEDED = json.loads((Path(__file__).parent / "seeded_other.json").read_text())
NOTE = "Flushed the tenant token cache per RB-207; batch jobs re-authenticated after the key rotation."


def norm(text):
    return re.sub(r"\s+", " ", (text or "")).strip().lower()


@pytest.fixture(scope="module")
def db():
    conn = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def case(db):
    row = db.execute("SELECT * FROM cases WHERE id = 'QZ-418'").fetchone()
    assert row is not None, "case QZ-418 is gone"
    events = db.execute("SELECT * FROM case_events WHERE case_id = 'QZ-418' ORDER BY seq").fetchall()
    assert events, "QZ-418 was never saved (no history)"
    return dict(row)


def test_case_is_resolved(case):
    assert case["status"] == "resolved"


def test_runbook_matches_the_symptom(case):
    assert case["runbook"] == "RB-207", "the symptom (batch jobs, 'token expired' after a key rotation) is RB-207's"


def test_assigned_to_mira_chen(case):
    assert case["assignee"] == "E-12", "Mira Chen (Platform) is E-12; E-15 is Mira Cheng"


def test_resolution_note_from_the_runbook(case):
    assert norm(case["resolution_note"]) == norm(NOTE)


def test_escalation_review_completed(case):
    assert case["escalation"] == "no_escalation"


def test_bookkeeping_resolved_from_a_saved_draft(db, case):
    events = [dict(e) for e in db.execute("SELECT * FROM case_events WHERE case_id = 'QZ-418' ORDER BY seq")]
    resolved = [i for i, e in enumerate(events) if e["action"] == "resolved"]
    assert len(resolved) == 1 and resolved[0] == len(events) - 1, "resolved exactly once, as the last step"
    draft = events[resolved[0] - 1] if resolved[0] else None
    assert draft and draft["action"] == "draft_saved" and draft["to_status"] == "draft"
    assert events[-1]["from_status"] == "draft" and events[-1]["to_status"] == "resolved"
    saved = json.loads(draft["snapshot"])
    assert saved["runbook"] == "RB-207" and saved["assignee"] == "E-12" and saved["escalation"] == "no_escalation"


def test_bookkeeping_other_cases_and_reference_data_untouched(db, case):
    assert [dict(r) for r in db.execute("SELECT * FROM cases WHERE id != 'QZ-418' ORDER BY id")] == SEEDED["cases"]
    assert [dict(r) for r in db.execute("SELECT * FROM case_events WHERE case_id != 'QZ-418' "
                                        "ORDER BY case_id, seq")] == SEEDED["case_events"]
    assert [dict(r) for r in db.execute("SELECT * FROM runbooks ORDER BY id")] == SEEDED["runbooks"]
    assert [dict(r) for r in db.execute("SELECT * FROM engineers ORDER BY id")] == SEEDED["engineers"]
