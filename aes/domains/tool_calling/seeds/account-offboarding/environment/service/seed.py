"""Create the directory's database (run once, at image build)."""
import json
import os
import sqlite3

HERE = os.path.dirname(os.path.abspath(__file__))
DB = os.path.join(HERE, "state.db")
POLICY = {
    "policy_id": "OFF-3",
    "title": "Offboarding a leaver",
    "steps": [
        "1. Reassign every ticket the leaver owns that is not closed (status open or in_progress) to the "
        "leaver's manager. Closed tickets keep their owner.",
        "2. Remove the leaver from every group, then add them to the group alumni.",
        "3. Disable the leaver's account with reason 'offboarded'. A disabled account cannot be changed any "
        "more, so this step comes last.",
    ],
}
USERS = [
    ("U-099", "Ola Berg", "sales", None, "disabled", "offboarded"),
    ("U-101", "Maren Holt", "sales", None, "active", None),
    ("U-150", "Ivo Brandt", "finance", None, "active", None),
    ("U-207", "Dana Whitfield", "sales", "U-101", "active", None),
    ("U-212", "Kai Lund", "sales", "U-101", "active", None),
    ("U-270", "Dana Whitfield-Ross", "finance", "U-150", "active", None),
]
MEMBERSHIPS = [("U-099", "alumni"), ("U-101", "all-staff"), ("U-101", "sales"), ("U-101", "vpn"),
               ("U-150", "all-staff"), ("U-150", "finance"), ("U-207", "all-staff"), ("U-207", "crm-admins"),
               ("U-207", "sales"), ("U-207", "vpn"), ("U-212", "all-staff"), ("U-212", "sales"),
               ("U-212", "vpn"), ("U-270", "all-staff"), ("U-270", "finance"), ("U-270", "vpn")]
TICKETS = [("T-501", "Renew Fjord Foods contract", "U-207", "open"),
           ("T-502", "Quote for Alba Hotels", "U-207", "in_progress"),
           ("T-503", "Onboard Kestrel Ltd", "U-207", "closed"),
           ("T-504", "Price review Q3", "U-212", "open"),
           ("T-505", "Invoice dispute Norrvik", "U-270", "open")]
if os.path.exists(DB):
    os.remove(DB)
con = sqlite3.connect(DB)
con.executescript("""
CREATE TABLE policy (id TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE users (id TEXT PRIMARY KEY, name TEXT NOT NULL, department TEXT NOT NULL, manager_id TEXT,
                    status TEXT NOT NULL, status_reason TEXT);
CREATE TABLE memberships (user_id TEXT NOT NULL, grp TEXT NOT NULL, PRIMARY KEY (user_id, grp));
CREATE TABLE tickets (id TEXT PRIMARY KEY, title TEXT NOT NULL, owner_id TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE audit (seq INTEGER PRIMARY KEY, action TEXT NOT NULL, target TEXT NOT NULL, detail TEXT NOT NULL);
""")
con.execute("INSERT INTO policy VALUES (?, ?)", (POLICY["policy_id"], json.dumps(POLICY, sort_keys=True)))
con.executemany("INSERT INTO users VALUES (?, ?, ?, ?, ?, ?)", USERS)
con.executemany("INSERT INTO memberships VALUES (?, ?)", MEMBERSHIPS)
con.executemany("INSERT INTO tickets VALUES (?, ?, ?, ?)", TICKETS)
con.execute("INSERT INTO audit VALUES (1, 'disable_user', 'U-099', 'offboarded')")
con.commit()
con.close()
