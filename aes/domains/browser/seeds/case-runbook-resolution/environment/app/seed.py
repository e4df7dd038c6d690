"""Seeds the service console's database (run once at image build; the same data every time)."""

import os
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from webapp import password_hash  # noqa: E402

DB = os.environ.get("APP_DB", "/srv/console/app.db")

USERS = [("duty.lead", "lantern-42")]

ENGINEERS = [
    ("E-07", "Omar Haddad", "Platform"), ("E-12", "Mira Chen", "Platform"),
    ("E-15", "Mira Cheng", "Billing"), ("E-21", "Tomas Varga", "Data"), ("E-30", "Ines Duarte", "Identity"),
]

RUNBOOKS = [
    ("RB-104", "Ingest backlog after a broker restart",
     "Queue depth grows for more than 15 minutes after a message-broker restart; producers succeed, consumers lag.",
     "Restart the consumer group; confirm lag returns under 1,000 messages.",
     "Consumer group restarted per RB-104; lag back under threshold.", "no_escalation"),
    ("RB-207", "Stale signing key in the token cache",
     "Scheduled or batch jobs fail with 'token expired' right after a signing-key rotation, while interactive "
     "sign-ins and freshly issued API tokens keep working.",
     "Flush the tenant's token cache; re-run one failed job to confirm it authenticates.",
     "Flushed the tenant token cache per RB-207; batch jobs re-authenticated after the key rotation.",
     "no_escalation"),
    ("RB-233", "Expired OAuth client secret",
     "Every API call from one integration fails with 'invalid_client'; no call from it succeeds, interactive "
     "sign-ins are unaffected.",
     "Ask the customer to rotate the client secret in their integration settings.",
     "Client secret rotated by the customer per RB-233.", "tier2"),
    ("RB-311", "Report export times out",
     "Large report exports stop after 120 seconds with a gateway timeout; small exports work.",
     "Move the export to the asynchronous queue; send the customer the download link.",
     "Export re-run asynchronously per RB-311.", "no_escalation"),
    ("RB-418", "Disk pressure on ingest nodes",
     "Ingest nodes report disk usage above 90%; writes slow down for every tenant in the region.",
     "Expand the ingest volume; page the storage on-call if usage keeps rising.",
     "Ingest volume expanded per RB-418.", "tier2"),
    ("RB-452", "SSO redirect loop",
     "Users bounce between the identity provider and the console after signing in; clearing cookies does not help.",
     "Correct the SSO callback URL in the tenant's identity settings.",
     "SSO callback URL corrected per RB-452.", "no_escalation"),
]

# id, customer, title, symptom, priority, status, assignee, runbook, note, escalation
CASES = [
    ("QZ-402", "Kestrel Freight", "Exports failing for monthly report",
     "The monthly tonnage report export stops after two minutes with a gateway timeout.", "P3",
     "resolved", "E-21", "RB-311", "Export re-run asynchronously per RB-311.", "no_escalation"),
    ("QZ-407", "Bramblewood Inc", "Consumers lagging since maintenance",
     "Since last night's broker maintenance the order consumers are far behind.", "P2",
     "open", None, None, None, None),
    ("QZ-411", "Orchid Logistics", "Integration rejected by API",
     "Our warehouse integration gets invalid_client on every request since this morning.", "P2",
     "open", "E-30", None, None, None),
    ("QZ-415", "Orchid Labs", "Login loop on SSO",
     "Staff are sent back and forth between our identity provider and the console.", "P3",
     "draft", "E-30", "RB-452", "Callback URL under review.", None),
    ("QZ-418", "Orchid Labs", "Nightly sync jobs failing",
     "Since the signing-key rotation on Monday our nightly sync jobs fail with 'token expired'. Engineers "
     "signing in to the console, and API calls with newly issued tokens, work normally.", "P2",
     "open", None, None, None, None),
    ("QZ-421", "Kestrel Freight", "Slow writes in eu-west",
     "Writes to the eu-west region have been slow for an hour.", "P1",
     "open", "E-07", None, None, None),
    ("QZ-426", "Orchid Labs", "Batch job token errors (duplicate of QZ-418)",
     "Same report as QZ-418, filed twice by the customer.", "P4",
     "open", None, None, None, None),
    ("QZ-433", "Halden Energy", "Report export timeout",
     "Annual consumption export times out; the weekly one works.", "P3",
     "open", None, None, None, None),
]

EVENTS = [
    ("QZ-402", 1, "draft_saved", "open", "draft", "duty.lead"),
    ("QZ-402", 2, "resolved", "draft", "resolved", "duty.lead"),
    ("QZ-415", 1, "draft_saved", "open", "draft", "duty.lead"),
]


def main() -> None:
    os.makedirs(os.path.dirname(DB), exist_ok=True)
    if os.path.exists(DB):
        os.remove(DB)
    conn = sqlite3.connect(DB)
    conn.executescript("""
        CREATE TABLE users (username TEXT PRIMARY KEY, password_hash TEXT NOT NULL);
        CREATE TABLE engineers (id TEXT PRIMARY KEY, name TEXT NOT NULL, team TEXT NOT NULL);
        CREATE TABLE runbooks (id TEXT PRIMARY KEY, title TEXT, symptoms TEXT, steps TEXT, note TEXT,
                               escalation TEXT);
        CREATE TABLE cases (id TEXT PRIMARY KEY, customer TEXT, title TEXT, symptom TEXT, priority TEXT,
                            status TEXT, assignee TEXT, runbook TEXT, resolution_note TEXT, escalation TEXT);
        CREATE TABLE case_events (case_id TEXT, seq INTEGER, action TEXT, from_status TEXT, to_status TEXT,
                                  actor TEXT, snapshot TEXT, PRIMARY KEY (case_id, seq));
    """)
    conn.executemany("INSERT INTO users VALUES (?, ?)", [(u, password_hash(p)) for u, p in USERS])
    conn.executemany("INSERT INTO engineers VALUES (?, ?, ?)", ENGINEERS)
    conn.executemany("INSERT INTO runbooks VALUES (?, ?, ?, ?, ?, ?)", RUNBOOKS)
    conn.executemany("INSERT INTO cases VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", CASES)
    conn.executemany("INSERT INTO case_events VALUES (?, ?, ?, ?, ?, ?, '{}')", EVENTS)
    conn.commit()
    conn.close()


if __name__ == "__main__":
    main()
