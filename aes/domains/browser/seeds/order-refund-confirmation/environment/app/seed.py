"""Seeds the order desk's database (run once at image build; the same data every time)."""

import os
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from webapp import password_hash  # noqa: E402

DB = os.environ.get("APP_DB", "/srv/desk/app.db")

USERS = [("desk.agent", "juniper-19")]

# id, customer, placed_on, payment
ORDERS = [
    ("NW-5513", "Ada Okonkwo", "2026-10-02", "Visa ending 4417"),
    ("NW-5520", "Lars Petersen", "2026-10-09", "Mastercard ending 0932"),
    ("NW-5531", "Ada Okonkwo", "2026-11-12", "Visa ending 4417"),
    ("NW-5547", "Priya Raman", "2026-11-20", "Store credit"),
]

# order, line, sku, item, quantity, unit price in cents
LINES = [
    ("NW-5513", 1, "TL-200", "Trail lantern", 1, 3450), ("NW-5513", 2, "DB-10", "Dry bag 10 L", 2, 1890),
    ("NW-5520", 1, "TN-2P", "Two-person tent", 1, 21900),
    ("NW-5531", 1, "TN-2P", "Two-person tent", 1, 21900), ("NW-5531", 2, "TL-200", "Trail lantern", 3, 3450),
    ("NW-5531", 3, "SP-4", "Tent stake pack", 2, 990),
    ("NW-5547", 1, "TL-200", "Trail lantern", 2, 3450),
]

# id, order, sender, subject, body
MESSAGES = [
    (1, "NW-5513", "Ada Okonkwo", "Thanks!", "The dry bags from my October order are great, thank you."),
    (2, "NW-5531", "Ada Okonkwo", "Damaged lanterns in my November order",
     "Hello, two of the three trail lanterns in order NW-5531 arrived with cracked glass; the third one and the "
     "rest of the order are fine. Please refund the two broken lanterns to the card I paid with - I do not want "
     "store credit. Thanks, Ada"),
    (3, "NW-5547", "Priya Raman", "Lantern colour", "Do the trail lanterns come in green?"),
]

# id, order, status, reason, method, amount in cents
REFUNDS = [(1, "NW-5520", "issued", "not_as_described", "original_payment", 21900)]
REFUND_LINES = [(1, 1, 1)]
EVENTS = [(1, 1, "draft_created", "desk.agent"), (2, 1, "method_chosen", "desk.agent"), (3, 1, "issued", "desk.agent")]


def main() -> None:
    os.makedirs(os.path.dirname(DB), exist_ok=True)
    if os.path.exists(DB):
        os.remove(DB)
    conn = sqlite3.connect(DB)
    conn.executescript("""
        CREATE TABLE users (username TEXT PRIMARY KEY, password_hash TEXT NOT NULL);
        CREATE TABLE orders (id TEXT PRIMARY KEY, customer TEXT, placed_on TEXT, payment TEXT);
        CREATE TABLE order_lines (order_id TEXT, line INTEGER, sku TEXT, item TEXT, quantity INTEGER,
                                  unit_cents INTEGER, PRIMARY KEY (order_id, line));
        CREATE TABLE messages (id INTEGER PRIMARY KEY, order_id TEXT, sender TEXT, subject TEXT, body TEXT);
        CREATE TABLE refunds (id INTEGER PRIMARY KEY, order_id TEXT, status TEXT, reason TEXT, method TEXT,
                              amount_cents INTEGER);
        CREATE TABLE refund_lines (refund_id INTEGER, line INTEGER, quantity INTEGER, PRIMARY KEY (refund_id, line));
        CREATE TABLE refund_events (seq INTEGER PRIMARY KEY, refund_id INTEGER, action TEXT, actor TEXT);
    """)
    conn.executemany("INSERT INTO users VALUES (?, ?)", [(u, password_hash(p)) for u, p in USERS])
    conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", ORDERS)
    conn.executemany("INSERT INTO order_lines VALUES (?, ?, ?, ?, ?, ?)", LINES)
    conn.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?)", MESSAGES)
    conn.executemany("INSERT INTO refunds VALUES (?, ?, ?, ?, ?, ?)", REFUNDS)
    conn.executemany("INSERT INTO refund_lines VALUES (?, ?, ?)", REFUND_LINES)
    conn.executemany("INSERT INTO refund_events VALUES (?, ?, ?, ?)", EVENTS)
    conn.commit()
    conn.close()


if __name__ == "__main__":
    main()
