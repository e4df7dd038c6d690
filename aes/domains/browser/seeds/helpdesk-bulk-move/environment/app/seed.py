"""Seeds the helpdesk's database (run once at image build; the same data every time)."""

import os
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from webapp import password_hash  # noqa: E402

DB = os.environ.get("APP_DB", "/srv/helpdesk/app.db")

USERS = [("triage.lead", "harbor-63")]
QUEUES = ["General", "Billing", "Technical", "Accounts"]

# id, customer, subject, status, queue, priority
TICKETS = [
    ("T-1001", "Lumen Dental", "Invoice 4471 charged twice", "open", "General", "P2"),
    ("T-1002", "Cobalt Farms", "Invoice PDF will not open", "open", "General", "P3"),
    ("T-1003", "Lumen Dental", "Cannot reset my password", "open", "General", "P3"),
    ("T-1004", "Lumen Denta Labs", "Invoice address is wrong", "open", "General", "P3"),
    ("T-1005", "Lumen Dental", "Question about last month's invoice", "closed", "General", "P4"),
    ("T-1006", "Ridgeway Hotels", "API returns 500 on bookings", "open", "Technical", "P1"),
    ("T-1007", "Lumen Dental", "VAT number missing on invoice 4502", "open", "General", "P3"),
    ("T-1008", "Cobalt Farms", "Add a second admin", "open", "Accounts", "P4"),
    ("T-1009", "Ridgeway Hotels", "Invoice total does not match the quote", "open", "General", "P2"),
    ("T-1010", "Lumen Dental", "Export of patient reminders is slow", "open", "Technical", "P3"),
    ("T-1011", "Marlow & Finch", "Invoice reminder sent by mistake", "open", "General", "P3"),
    ("T-1012", "Lumen Dental", "Credit note for invoice 4471 not received", "open", "General", "P2"),
    ("T-1013", "Cobalt Farms", "Sync with the accounting tool fails", "open", "Technical", "P2"),
    ("T-1014", "Lumen Dental", "Invoice 4519 sent to an old e-mail address", "open", "Accounts", "P3"),
]

EVENTS = [(1, "T-1005", "triage.lead", "closed", "")]


def main() -> None:
    os.makedirs(os.path.dirname(DB), exist_ok=True)
    if os.path.exists(DB):
        os.remove(DB)
    conn = sqlite3.connect(DB)
    conn.executescript("""
        CREATE TABLE users (username TEXT PRIMARY KEY, password_hash TEXT NOT NULL);
        CREATE TABLE queues (name TEXT PRIMARY KEY);
        CREATE TABLE tickets (id TEXT PRIMARY KEY, customer TEXT, subject TEXT, status TEXT, queue TEXT,
                              priority TEXT);
        CREATE TABLE ticket_events (seq INTEGER PRIMARY KEY, ticket_id TEXT, actor TEXT, action TEXT, detail TEXT);
        CREATE TABLE bulk_actions (seq INTEGER PRIMARY KEY, actor TEXT, tickets TEXT, queue TEXT, note TEXT);
    """)
    conn.executemany("INSERT INTO users VALUES (?, ?)", [(u, password_hash(p)) for u, p in USERS])
    conn.executemany("INSERT INTO queues VALUES (?)", [(q,) for q in QUEUES])
    conn.executemany("INSERT INTO tickets VALUES (?, ?, ?, ?, ?, ?)", TICKETS)
    conn.executemany("INSERT INTO ticket_events VALUES (?, ?, ?, ?, ?)", EVENTS)
    conn.commit()
    conn.close()


if __name__ == "__main__":
    main()
