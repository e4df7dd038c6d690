"""Checks the claims service's final state (read straight from its database, as root)."""
import hashlib
import json
import sqlite3

import pytest

DB = "/srv/claims/state.db"


@pytest.fixture(scope="module")
def con():
    connection = sqlite3.connect("file:%s?mode=ro" % DB, uri=True)
    yield connection
    connection.close()


def work_done(con):
    """Whether any of B-2611's records has changed from the seeded state (doing nothing earns 0)."""
    return con.execute("SELECT COUNT(*) FROM claims WHERE batch_id = 'B-2611' AND decision IS NOT NULL"
                       ).fetchone()[0] > 0 or \
        con.execute("SELECT status FROM batches WHERE id = 'B-2611'").fetchone()[0] != "open"


def decision(con, claim_id):
    return tuple(con.execute("SELECT decision, reason, payout_cents FROM claims WHERE id = ?", (claim_id,)).fetchone())


def test_rule_order_and_policy_in_force(con):
    # an expired policy is denied before a large amount is referred; a cancelled policy is not in force
    # on its cancellation day; a category outside the plan is not covered
    assert decision(con, "CL-2611-02") == ("deny", "NOT_IN_FORCE", 0)
    assert decision(con, "CL-2611-08") == ("deny", "NOT_IN_FORCE", 0)
    assert decision(con, "CL-2611-06") == ("deny", "NOT_COVERED", 0)


def test_reporting_window_and_referral_threshold(con):
    # 30 days is within the window, 31 days is late; 730000 is above the threshold, 500000 merely equals it
    assert decision(con, "CL-2611-03") == ("approve", "COVERED", 28000)
    assert decision(con, "CL-2611-09") == ("deny", "LATE_REPORT", 0)
    assert decision(con, "CL-2611-05") == ("refer", "MANUAL_REVIEW", 0)
    assert decision(con, "CL-2611-07") == ("approve", "COVERED", 490000)


def test_deductible_and_annual_limits(con):
    # the limit left after earlier approved payouts of the same policy, category and year (a denied claim
    # and another category do not count; this batch's own earlier approvals do); a new year starts afresh
    assert decision(con, "CL-2611-01") == ("approve", "COVERED", 120000)
    assert decision(con, "CL-2611-04") == ("approve", "LIMIT_CAPPED", 30000)
    assert decision(con, "CL-2611-11") == ("approve", "COVERED", 110000)
    assert decision(con, "CL-2611-10") == ("deny", "BELOW_DEDUCTIBLE", 0)


def test_bookkeeping_batch_closed(con):
    assert con.execute("SELECT status FROM batches WHERE id = 'B-2611'").fetchone()[0] == "closed"


def test_bookkeeping_other_records_untouched(con):
    # leaving the other records alone is only worth something once the batch's work was done
    assert work_done(con), "nothing of B-2611 was adjudicated"
    batches = con.execute("SELECT id, status FROM batches WHERE id != 'B-2611' ORDER BY id").fetchall()
    assert batches == [("B-2610", "closed"), ("B-2612", "open")]
    others = con.execute("SELECT id, batch_id, policy_id, decision, reason, payout_cents FROM claims "
                         "WHERE batch_id != 'B-2611' ORDER BY id").fetchall()
    assert others == [
        ("CL-2610-01", "B-2610", "P-1005", "approve", "COVERED", 35000),
        ("CL-2610-02", "B-2610", "P-1001", "approve", "COVERED", 15000),
        ("CL-2610-03", "B-2610", "P-1001", "approve", "COVERED", 150000),
        ("CL-2610-04", "B-2610", "P-1002", "approve", "COVERED", 250000),
        ("CL-2610-05", "B-2610", "P-1001", "deny", "LATE_REPORT", 0),
        ("CL-2610-06", "B-2610", "P-1003", "deny", "BELOW_DEDUCTIBLE", 0),
        ("CL-2612-01", "B-2612", "P-1005", None, None, None),
        ("CL-2612-02", "B-2612", "P-1002", None, None, None),
    ]
    ids = [r[0] for r in con.execute("SELECT id FROM claims WHERE batch_id = 'B-2611' ORDER BY id")]
    assert ids == ["CL-2611-%02d" % i for i in range(1, 12)]

    def digest(sql):
        return hashlib.sha256(json.dumps(con.execute(sql).fetchall()).encode()).hexdigest()

    assert digest("SELECT id, batch_id, policy_id, category, incident_date, reported_date, amount_cents FROM claims "
                  "ORDER BY id") == "56c634c8c727b0123ea2eb3d37bd2d192831edf674d806b1728610e86f10be36"
    assert digest("SELECT * FROM policies ORDER BY id") == \
        "e3526dc17831c2c0c5f54e0246eef3411f710b19e18c849ca1993c352a8bc17e"
    assert digest("SELECT * FROM plans ORDER BY plan, category") == \
        "ba99958bf3970ddf4d835b0dafa31a2b6a79c2548b2be3234b196e612f9f0e4e"
    guide = con.execute("SELECT body FROM guide").fetchone()[0]
    assert hashlib.sha256(guide.encode()).hexdigest() == \
        "07950cb2db18da5368da8df3a503bf15e1ffafb9b91caf0a289ef3ad6ca2d4d7"


def test_bookkeeping_audit_ledger(con):
    entries = con.execute("SELECT seq, action, target, detail FROM audit ORDER BY seq").fetchall()
    assert entries[:7] == [(1, "adjudicate_claim", "CL-2610-01", "approve COVERED 35000"),
                           (2, "adjudicate_claim", "CL-2610-02", "approve COVERED 15000"),
                           (3, "adjudicate_claim", "CL-2610-03", "approve COVERED 150000"),
                           (4, "adjudicate_claim", "CL-2610-04", "approve COVERED 250000"),
                           (5, "adjudicate_claim", "CL-2610-05", "deny LATE_REPORT 0"),
                           (6, "adjudicate_claim", "CL-2610-06", "deny BELOW_DEDUCTIBLE 0"),
                           (7, "close_batch", "B-2610", "closed")]
    new = entries[7:]
    assert new and new[-1][1:] == ("close_batch", "B-2611", "closed")
    assert all(action == "adjudicate_claim" and target.startswith("CL-2611-") for _, action, target, _ in new[:-1])
    latest = {target: detail for _, action, target, detail in new if action == "adjudicate_claim"}
    assert len(latest) == 11
    for target, detail in latest.items():
        assert detail == "%s %s %d" % decision(con, target)
