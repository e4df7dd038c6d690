"""Seeds the admin console's database (run once at image build; the same data every time)."""

import json
import os
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from webapp import password_hash  # noqa: E402

DB = os.environ.get("APP_DB", "/srv/admin/app.db")

USERS = [("admin.ops", "sextant-77")]

# slug, name, plan, verified domains (one per line)
TENANTS = [
    ("halvorsen-marine", "Halvorsen Marine", "Enterprise", "halvorsenmarine.example\nhm-fleet.example\nhm-crew.example"),
    ("halvorsen-mining", "Halvorsen Mining", "Business", "halvorsen-mining.example"),
    ("pinecrest-clinics", "Pinecrest Clinics", "Enterprise", "pinecrest.example"),
    ("quarry-lane-legal", "Quarry Lane Legal", "Business", "quarrylane.example\nql-law.example"),
    ("ostara-foods", "Ostara Foods", "Starter", "ostarafoods.example"),
]

# slug, timeout, password min, mfa, retention, allowed domains, ip allowlist, support contact
SETTINGS = [
    ("halvorsen-marine", 45, 16, 0, 90, "halvorsenmarine.example\nhm-fleet.example\nfreemail.example\n"
     "halvorsen-mining.example", "198.51.100.0/24", "it-desk@halvorsenmarine.example"),
    ("halvorsen-mining", 60, 12, 0, 180, "halvorsen-mining.example", "", "support@halvorsen-mining.example"),
    ("pinecrest-clinics", 20, 14, 1, 365, "pinecrest.example", "203.0.113.0/25\n203.0.113.128/25",
     "helpdesk@pinecrest.example"),
    ("quarry-lane-legal", 30, 12, 1, 730, "quarrylane.example\nql-law.example", "", "it@quarrylane.example"),
    ("ostara-foods", 120, 10, 0, 30, "ostarafoods.example", "", "ops@ostarafoods.example"),
]

POLICIES = [
    ("SEC-5", "Workforce sign-in baseline (v2) - superseded by SEC-7", "superseded",
     "Idle session timeout: at most 60 minutes.\nPassword minimum length: at least 12 characters.\n"
     "Multi-factor authentication: recommended.\nAudit data retention: 180 days."),
    ("SEC-7", "Workforce sign-in baseline (v3)", "active",
     "Idle session timeout: at most 30 minutes. A tenant whose timeout is already shorter keeps its value.\n"
     "Password minimum length: at least 14 characters. A tenant whose minimum is already longer keeps it.\n"
     "Multi-factor authentication: required for every user.\n"
     "Audit data retention: exactly 365 days.\n"
     "Allowed sign-in domains: exactly the tenant's verified domains, as listed on its profile page; remove "
     "every other domain.\n"
     "IP allowlist and support contact: not covered by this policy; leave them as they are.\n"
     "Every settings change cites its change request number."),
    ("SEC-9", "Contractor access", "active",
     "Contractor accounts expire after 90 days and cannot hold the tenant-admin role."),
]

AUDIT = [
    (1, "pinecrest-clinics", "admin.ops", "CHG-2104", json.dumps({"mfa_required": [0, 1]})),
    (2, "quarry-lane-legal", "admin.ops", "CHG-2150", json.dumps({"retention_days": [365, 730]})),
]


def main() -> None:
    os.makedirs(os.path.dirname(DB), exist_ok=True)
    if os.path.exists(DB):
        os.remove(DB)
    conn = sqlite3.connect(DB)
    conn.executescript("""
        CREATE TABLE users (username TEXT PRIMARY KEY, password_hash TEXT NOT NULL);
        CREATE TABLE tenants (slug TEXT PRIMARY KEY, name TEXT, plan TEXT, verified_domains TEXT);
        CREATE TABLE settings (slug TEXT PRIMARY KEY, session_timeout_minutes INTEGER, password_min_length INTEGER,
                               mfa_required INTEGER, retention_days INTEGER, allowed_domains TEXT,
                               ip_allowlist TEXT, support_contact TEXT);
        CREATE TABLE policies (id TEXT PRIMARY KEY, title TEXT, status TEXT, body TEXT);
        CREATE TABLE audit (seq INTEGER PRIMARY KEY, slug TEXT, actor TEXT, change_ref TEXT, changes TEXT);
    """)
    conn.executemany("INSERT INTO users VALUES (?, ?)", [(u, password_hash(p)) for u, p in USERS])
    conn.executemany("INSERT INTO tenants VALUES (?, ?, ?, ?)", TENANTS)
    conn.executemany("INSERT INTO settings VALUES (?, ?, ?, ?, ?, ?, ?, ?)", SETTINGS)
    conn.executemany("INSERT INTO policies VALUES (?, ?, ?, ?)", POLICIES)
    conn.executemany("INSERT INTO audit VALUES (?, ?, ?, ?, ?)", AUDIT)
    conn.commit()
    conn.close()


if __name__ == "__main__":
    main()
