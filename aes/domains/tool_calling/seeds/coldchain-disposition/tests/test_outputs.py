"""Checks the cold-chain service's final state (read straight from its database, as root)."""
import hashlib
import json
import sqlite3

import pytest

DB = "/srv/coldchain/state.db"


@pytest.fixture(scope="module")
def con():
    connection = sqlite3.connect("file:%s?mode=ro" % DB, uri=True)
    yield connection
    connection.close()


def work_done(con):
    """Whether any of CN-4410's records has changed from the seeded state (doing nothing earns 0)."""
    return con.execute("SELECT COUNT(*) FROM shipments WHERE consignment_id = 'CN-4410' AND disposition IS NOT NULL"
                       ).fetchone()[0] > 0 or \
        con.execute("SELECT status FROM consignments WHERE id = 'CN-4410'").fetchone()[0] != "open"


def disposition(con, shipment_id):
    return tuple(con.execute("SELECT disposition, reason FROM shipments WHERE id = ?", (shipment_id,)).fetchone())


def test_rule_precedence(con):
    # more than two sensor faults outrank a real critical breach; one fault does not hide a breach
    assert disposition(con, "SH-4410-04") == ("hold", "SENSOR_FAULTS")
    assert disposition(con, "SH-4410-07") == ("reject", "CRITICAL_BREACH")


def test_flagged_readings_and_equality(con):
    # a flagged 12.3 is no temperature; 8.0 is not above 8.0; 60 excursion minutes are not above 60
    assert disposition(con, "SH-4410-02") == ("release", "WITHIN_LIMITS")
    assert disposition(con, "SH-4410-03") == ("release", "WITHIN_LIMITS")
    assert disposition(con, "SH-4410-06") == ("release", "WITHIN_LIMITS")


def test_excursion_allowance(con):
    # 4 x 20 min and 7 x 10 min of excursion (flagged readings excluded); a clean log is released
    assert disposition(con, "SH-4410-05") == ("reject", "EXCURSION_LIMIT")
    assert disposition(con, "SH-4410-08") == ("reject", "EXCURSION_LIMIT")
    assert disposition(con, "SH-4410-01") == ("release", "WITHIN_LIMITS")


def test_bookkeeping_consignment_closed(con):
    assert con.execute("SELECT status FROM consignments WHERE id = 'CN-4410'").fetchone()[0] == "closed"


def test_bookkeeping_other_records_untouched(con):
    # leaving the other records alone is only worth something once the task's work was done
    assert work_done(con), "nothing of CN-4410 was processed"
    consignments = con.execute("SELECT id, customer, status FROM consignments WHERE id != 'CN-4410' ORDER BY id").fetchall()
    assert consignments == [("CN-4411", "Vastra Klinik", "open"), ("CN-4412", "Lumen Biolab", "closed")]
    others = con.execute("SELECT id, consignment_id, product, interval_minutes, disposition, reason FROM shipments "
                         "WHERE consignment_id != 'CN-4410' ORDER BY id").fetchall()
    assert others == [
        ("SH-4411-01", "CN-4411", "insulin aspart", 15, None, None),
        ("SH-4411-02", "CN-4411", "MMR vaccine", 15, None, None),
        ("SH-4412-01", "CN-4412", "pegfilgrastim", 15, "release", "WITHIN_LIMITS"),
        ("SH-4412-02", "CN-4412", "trastuzumab", 15, "reject", "CRITICAL_BREACH"),
    ]
    ids = [r[0] for r in con.execute("SELECT id FROM shipments WHERE consignment_id = 'CN-4410' ORDER BY id")]
    assert ids == ["SH-4410-0%d" % i for i in range(1, 9)]
    readings = con.execute("SELECT shipment_id, seq, temp_c, flag FROM readings ORDER BY shipment_id, seq").fetchall()
    assert hashlib.sha256(json.dumps(readings).encode()).hexdigest() == \
        "0b31d47c093121e7232909506abc68a520a61d3501b27806d5a1fe18b1f3dd77"
    policy = con.execute("SELECT body FROM policy").fetchone()[0]
    assert hashlib.sha256(policy.encode()).hexdigest() == \
        "7bfca7665759795aa1c2bc75865e77e5916bab39dea97f007b3fde3386379e87"


def test_bookkeeping_audit_ledger(con):
    entries = con.execute("SELECT seq, action, target, detail FROM audit ORDER BY seq").fetchall()
    assert entries[:3] == [(1, "set_disposition", "SH-4412-01", "release WITHIN_LIMITS"),
                           (2, "set_disposition", "SH-4412-02", "reject CRITICAL_BREACH"),
                           (3, "close_consignment", "CN-4412", "closed")]
    new = entries[3:]
    assert new and new[-1][1:] == ("close_consignment", "CN-4410", "closed")
    assert all(target.startswith("SH-4410-") for _, action, target, _ in new[:-1])
    latest = {target: detail for _, action, target, detail in new if action == "set_disposition"}
    assert len(latest) == 8
    for target, detail in latest.items():
        assert detail == "%s %s" % disposition(con, target)
