"""Quayside helpdesk: a filterable, paginated ticket list with a bulk move that asks for confirmation."""

import json
import os
import sys
from urllib.parse import urlencode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from webapp import App, esc, redirect  # noqa: E402

app = App("Quayside Helpdesk", os.environ.get("APP_DB", "/srv/helpdesk/app.db"),
          nav=[("Tickets", "/tickets"), ("Bulk actions", "/bulk")])
PAGE = 8


@app.route("GET", "/")
def home(req):
    return redirect("/tickets")


def _queues(conn):
    return [r["name"] for r in conn.execute("SELECT name FROM queues ORDER BY name")]


@app.route("GET", "/tickets")
def tickets(req):
    q = req.query.get("q", "").strip()
    page = int(req.query.get("page", "1")) if req.query.get("page", "1").isdigit() else 1
    with app.db() as conn:
        rows = conn.execute("SELECT * FROM tickets WHERE customer LIKE ? OR subject LIKE ? OR id LIKE ? ORDER BY id",
                            (f"%{q}%",) * 3).fetchall()
        queues = _queues(conn)
    pages = max(1, -(-len(rows) // PAGE))
    page = min(max(page, 1), pages)
    shown = rows[(page - 1) * PAGE:page * PAGE]
    table = "".join(
        f'<tr><td><input type="checkbox" name="ticket" value="{r["id"]}" id="pick-{r["id"]}" '
        f'aria-label="Select {r["id"]}"></td><td><a href="/tickets/{r["id"]}">{r["id"]}</a></td>'
        f'<td>{esc(r["customer"])}</td><td>{esc(r["subject"])}</td><td>{r["status"]}</td><td>{r["queue"]}</td>'
        f'<td>{r["priority"]}</td></tr>' for r in shown)
    links = " ".join(f'<a href="/tickets?{urlencode({"q": q, "page": n})}">Page {n}</a>' if n != page
                     else f"<b>Page {n}</b>" for n in range(1, pages + 1))
    options = "".join(f'<option value="{esc(name)}">{esc(name)}</option>' for name in queues)
    body = (f'<form method="get" action="/tickets" class="card" id="filter"><label for="q">Search customer, '
            f'subject or id</label><input type="text" id="q" name="q" value="{esc(q)}">'
            f'<div><button type="submit" id="search">Search</button></div></form>'
            f'<p class="muted">{len(rows)} tickets; {links}</p>'
            f'<form method="post" action="/tickets/bulk" id="bulk">{app.csrf_field(req)}<table><tr><th></th>'
            f'<th>Ticket</th><th>Customer</th><th>Subject</th><th>Status</th><th>Queue</th><th>Priority</th></tr>'
            f'{table}</table><div class="card"><label for="queue">Move the selected tickets to</label>'
            f'<select id="queue" name="queue"><option value="">(choose a queue)</option>{options}</select>'
            f'<label for="note">Note</label><input type="text" id="note" name="note">'
            f'<div><button type="submit" id="review-move">Review move</button></div></div></form>')
    return app.page(req, "Tickets", body)


@app.route("GET", "/tickets/<tid>")
def ticket(req, tid):
    with app.db() as conn:
        t = conn.execute("SELECT * FROM tickets WHERE id = ?", (tid,)).fetchone()
        events = conn.execute("SELECT * FROM ticket_events WHERE ticket_id = ? ORDER BY seq", (tid,)).fetchall()
    if t is None:
        return app.page(req, "Not found", f'<div class="error">No ticket {esc(tid)}.</div>', 404)
    history = "".join(f"<li>{esc(e['actor'])}: {esc(e['action'])} {esc(e['detail'])}</li>" for e in events)
    body = (f'<div class="card"><p><b>Customer:</b> {esc(t["customer"])}</p><p><b>Subject:</b> {esc(t["subject"])}'
            f'</p><p><b>Status:</b> {t["status"]}</p><p><b>Queue:</b> <span id="ticket-queue">{t["queue"]}</span></p>'
            f'<p><b>Priority:</b> {t["priority"]}</p></div><h2>History</h2><ul>{history or "<li>none</li>"}</ul>')
    return app.page(req, f"Ticket {tid}", body)


@app.route("POST", "/tickets/bulk")
def bulk_review(req):
    ids = sorted(set(req.form_lists.get("ticket", [])))
    queue, note = req.form.get("queue", ""), req.form.get("note", "").strip()
    with app.db() as conn:
        found = conn.execute(f"SELECT * FROM tickets WHERE id IN ({','.join('?' * len(ids))}) ORDER BY id",
                             ids).fetchall() if ids else []
        queues = _queues(conn)
    errors = (["Select at least one ticket."] if not found or len(found) != len(ids) else []) + \
        (["Choose the queue to move them to."] if queue not in queues else []) + \
        (["Write a note for the move."] if not note else [])
    if errors:
        body = "".join(f'<div class="error">{esc(e)}</div>' for e in errors) + \
            '<p><a href="/tickets">Back to the tickets</a></p>'
        return app.page(req, "Bulk move", body, 422)
    items = "".join(f'<li>{t["id"]}: {esc(t["customer"])} - {esc(t["subject"])} ({t["queue"]} -&gt; {esc(queue)})'
                    f'<input type="hidden" name="ticket" value="{t["id"]}"></li>' for t in found)
    body = (f'<form method="post" action="/tickets/bulk/confirm" class="card" id="confirm">{app.csrf_field(req)}'
            f'<p>Move these {len(found)} tickets to <b>{esc(queue)}</b>?</p><ul id="selected">{items}</ul>'
            f'<p><b>Note:</b> {esc(note)}</p><input type="hidden" name="queue" value="{esc(queue)}">'
            f'<input type="hidden" name="note" value="{esc(note)}">'
            '<div><button type="submit" id="confirm-move">Confirm move</button></div></form>'
            '<p><a href="/tickets">Cancel</a></p>')
    return app.page(req, "Confirm bulk move", body)


@app.route("POST", "/tickets/bulk/confirm")
def bulk_confirm(req):
    ids = sorted(set(req.form_lists.get("ticket", [])))
    queue, note = req.form.get("queue", ""), req.form.get("note", "").strip()
    with app.db() as conn:
        found = conn.execute(f"SELECT * FROM tickets WHERE id IN ({','.join('?' * len(ids))}) ORDER BY id",
                             ids).fetchall() if ids else []
        if not found or len(found) != len(ids) or queue not in _queues(conn) or not note:
            return app.page(req, "Bulk move", '<div class="error">Nothing to move.</div>', 422)
        user = req.session["user"]
        seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM bulk_actions").fetchone()[0]
        conn.execute("INSERT INTO bulk_actions VALUES (?, ?, ?, ?, ?)", (seq, user, json.dumps(ids), queue, note))
        for t in found:
            conn.execute("UPDATE tickets SET queue = ? WHERE id = ?", (queue, t["id"]))
            n = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM ticket_events").fetchone()[0]
            conn.execute("INSERT INTO ticket_events VALUES (?, ?, ?, 'moved', ?)",
                         (n, t["id"], user, f"{t['queue']} -> {queue} (bulk {seq})"))
    app.flash(req, f"Moved {len(found)} tickets to {queue}.")
    return redirect("/bulk")


@app.route("GET", "/bulk")
def bulk_log(req):
    with app.db() as conn:
        rows = conn.execute("SELECT * FROM bulk_actions ORDER BY seq DESC").fetchall()
    body = "<table><tr><th>#</th><th>By</th><th>Tickets</th><th>Queue</th><th>Note</th></tr>" + "".join(
        f'<tr><td>{r["seq"]}</td><td>{esc(r["actor"])}</td><td>{esc(", ".join(json.loads(r["tickets"])))}</td>'
        f'<td>{esc(r["queue"])}</td><td>{esc(r["note"])}</td></tr>' for r in rows) + "</table>"
    return app.page(req, "Bulk actions", body)


if __name__ == "__main__":
    app.serve(int(os.environ.get("APP_PORT", "8080")))
