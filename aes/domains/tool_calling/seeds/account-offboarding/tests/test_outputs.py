"""Checks the directory's final state (read straight from its database, as root)."""
import sqlite3

import pytest

DB = "/srv/directory/state.db"


@pytest.fixture(scope="module")
def con():
    connection = sqlite3.connect("file:%s?mode=ro" % DB, uri=True)
    yield connection
    connection.close()


def work_done(con):
    """Whether any of the leaver's records has changed from the seeded state (doing nothing earns 0)."""
    status = con.execute("SELECT status FROM users WHERE id = 'U-207'").fetchone()[0]
    groups = sorted(r[0] for r in con.execute("SELECT grp FROM memberships WHERE user_id = 'U-207'"))
    owners = [r[0] for r in con.execute("SELECT owner_id FROM tickets WHERE id IN ('T-501', 'T-502')")]
    return status != "active" or groups != ["all-staff", "crm-admins", "sales", "vpn"] or owners != ["U-207", "U-207"]


def test_open_tickets_go_to_the_manager(con):
    owners = dict(con.execute("SELECT id, owner_id FROM tickets WHERE id IN ('T-501', 'T-502')").fetchall())
    assert owners == {"T-501": "U-101", "T-502": "U-101"}


def test_groups_replaced_by_alumni(con):
    groups = [r[0] for r in con.execute("SELECT grp FROM memberships WHERE user_id = 'U-207'")]
    assert groups == ["alumni"]


def test_account_disabled(con):
    row = con.execute("SELECT name, department, manager_id, status, status_reason FROM users WHERE id = 'U-207'").fetchone()
    assert row == ("Dana Whitfield", "sales", "U-101", "disabled", "offboarded")


def test_bookkeeping_other_records_untouched(con):
    # leaving the other records alone is only worth something once the offboarding was done
    assert work_done(con), "nothing of the offboarding was done"
    users = con.execute("SELECT * FROM users WHERE id != 'U-207' ORDER BY id").fetchall()
    assert users == [("U-099", "Ola Berg", "sales", None, "disabled", "offboarded"),
                     ("U-101", "Maren Holt", "sales", None, "active", None),
                     ("U-150", "Ivo Brandt", "finance", None, "active", None),
                     ("U-212", "Kai Lund", "sales", "U-101", "active", None),
                     ("U-270", "Dana Whitfield-Ross", "finance", "U-150", "active", None)]
    memberships = con.execute("SELECT user_id, grp FROM memberships WHERE user_id != 'U-207' "
                              "ORDER BY user_id, grp").fetchall()
    assert memberships == [("U-099", "alumni"), ("U-101", "all-staff"), ("U-101", "sales"), ("U-101", "vpn"),
                           ("U-150", "all-staff"), ("U-150", "finance"), ("U-212", "all-staff"),
                           ("U-212", "sales"), ("U-212", "vpn"), ("U-270", "all-staff"), ("U-270", "finance"),
                           ("U-270", "vpn")]
    tickets = con.execute("SELECT * FROM tickets ORDER BY id").fetchall()
    assert [t for t in tickets if t[0] not in ("T-501", "T-502")] == [
        ("T-503", "Onboard Kestrel Ltd", "U-207", "closed"),
        ("T-504", "Price review Q3", "U-212", "open"),
        ("T-505", "Invoice dispute Norrvik", "U-270", "open")]
    assert [(t[0], t[1], t[3]) for t in tickets if t[0] in ("T-501", "T-502")] == [
        ("T-501", "Renew Fjord Foods contract", "open"), ("T-502", "Quote for Alba Hotels", "in_progress")]


def test_bookkeeping_audit_ledger(con):
    entries = con.execute("SELECT seq, action, target, detail FROM audit ORDER BY seq").fetchall()
    assert entries[0] == (1, "disable_user", "U-099", "offboarded")
    new = entries[1:]
    assert new and new[-1][1:] == ("disable_user", "U-207", "offboarded")
    assert all(target in ("U-207", "T-501", "T-502") for _, _, target, _ in new)
