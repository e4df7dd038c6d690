"""Checks the admin console's saved state after Halvorsen Marine's settings were brought in line with
policy SEC-7 (the database is root-only: the solver can change it only through the application).

Every test first requires that Halvorsen Marine's settings were saved at least once (a new audit entry),
so an untouched console scores 0.
"""

import json
import os
import sqlite3
from pathlib import Path

import pytest

DB = os.environ.get("APP_DB", "/srv/admin/app.db")
SEEDED = json.loads((Path(__file__).parent / "seeded.json").read_text())
VERIFIED = ["halvorsenmarine.example", "hm-fleet.example", "hm-crew.example"]


@pytest.fixture(scope="module")
def db():
    conn = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def saved(db):
    seeded = {a["seq"] for a in SEEDED["audit"]}
    entries = [dict(r) for r in db.execute("SELECT * FROM audit WHERE slug = 'halvorsen-marine' ORDER BY seq")
               if r["seq"] not in seeded]
    assert entries, "Halvorsen Marine's settings were never saved (no new audit entry)"
    row = db.execute("SELECT * FROM settings WHERE slug = 'halvorsen-marine'").fetchone()
    return dict(row), entries


def test_session_timeout_at_most_30(saved):
    assert saved[0]["session_timeout_minutes"] == 30, "SEC-7: at most 30 minutes (the tenant had 45)"


def test_bookkeeping_password_minimum_kept_when_longer(saved):
    assert saved[0]["password_min_length"] == 16, "SEC-7 keeps a minimum already longer than 14 (the tenant had 16)"


def test_mfa_required(saved):
    assert saved[0]["mfa_required"] == 1


def test_retention_exactly_365(saved):
    assert saved[0]["retention_days"] == 365


def test_allowed_domains_are_the_verified_ones(saved):
    domains = saved[0]["allowed_domains"].split("\n")
    assert len(domains) == len(set(domains)) and set(domains) == set(VERIFIED), domains


def test_bookkeeping_allowlist_and_contact_untouched(saved):
    before = SEEDED["halvorsen_marine"]
    assert saved[0]["ip_allowlist"] == before["ip_allowlist"]
    assert saved[0]["support_contact"] == before["support_contact"]


def test_bookkeeping_change_request_cited(saved):
    assert all(e["change_ref"] == "CHG-2231" for e in saved[1]), [e["change_ref"] for e in saved[1]]


def test_bookkeeping_other_tenants_and_reference_data_untouched(db, saved):
    assert [dict(r) for r in db.execute("SELECT * FROM settings WHERE slug != 'halvorsen-marine' "
                                        "ORDER BY slug")] == SEEDED["settings"]
    assert [dict(r) for r in db.execute("SELECT * FROM tenants ORDER BY slug")] == SEEDED["tenants"]
    assert [dict(r) for r in db.execute("SELECT * FROM policies ORDER BY id")] == SEEDED["policies"]
    seeded = {a["seq"] for a in SEEDED["audit"]}
    assert [dict(r) for r in db.execute("SELECT * FROM audit ORDER BY seq") if r["seq"] in seeded] == SEEDED["audit"]
    assert not [r for r in db.execute("SELECT * FROM audit") if r["seq"] not in seeded and r["slug"] != "halvorsen-marine"]
