"""Helios service console: a case queue, case pages with a draft-then-resolve workflow, a runbook library."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from webapp import App, esc, redirect  # noqa: E402

app = App("Helios Service Console", os.environ.get("APP_DB", "/srv/console/app.db"), nav=[("Case queue", "/cases"), ("Runbooks", "/runbooks")])
ESCALATION = {"no_escalation": "Reviewed: no escalation needed", "tier2": "Escalate to Tier 2"}
FIELDS = ("runbook", "assignee", "resolution_note", "escalation")


@app.route("GET", "/")
def home(req):
    return redirect("/cases")


@app.route("GET", "/cases")
def queue(req):
    q, status = req.query.get("q", "").strip(), req.query.get("status", "")
    sql, args = "SELECT c.*, e.name AS engineer FROM cases c LEFT JOIN engineers e ON e.id = c.assignee WHERE 1", []
    if q:
        sql += " AND (c.id LIKE ? OR c.customer LIKE ? OR c.title LIKE ?)"
        args += [f"%{q}%"] * 3
    if status:
        sql += " AND c.status = ?"
        args.append(status)
    with app.db() as conn:
        rows = conn.execute(sql + " ORDER BY c.id", args).fetchall()
    options = "".join(f'<option value="{s}"{" selected" if s == status else ""}>{s or "any"}</option>'
                      for s in ("", "open", "draft", "resolved"))
    body = (f'<form method="get" action="/cases" class="card"><label for="q">Search cases</label>'
            f'<input type="text" id="q" name="q" value="{esc(q)}" placeholder="Case ID, customer or title">'
            f'<label for="status">Status</label><select id="status" name="status">{options}</select>'
            '<div><button type="submit" id="search">Search</button></div></form>'
            "<table><tr><th>Case</th><th>Customer</th><th>Title</th><th>Priority</th><th>Status</th>"
            "<th>Assignee</th></tr>")
    body += "".join(f'<tr><td><a href="/cases/{esc(r["id"])}">{esc(r["id"])}</a></td><td>{esc(r["customer"])}</td>'
                    f'<td>{esc(r["title"])}</td><td>{esc(r["priority"])}</td><td>{esc(r["status"])}</td>'
                    f'<td>{esc(r["engineer"] or "-")}</td></tr>' for r in rows)
    body += "</table>" + ("" if rows else '<p class="muted">No case matches.</p>')
    return app.page(req, "Case queue", body)


def _case(conn, case_id):
    return conn.execute("SELECT * FROM cases WHERE id = ?", (case_id,)).fetchone()


@app.route("GET", "/cases/<case_id>")
def case_page(req, case_id):
    with app.db() as conn:
        case = _case(conn, case_id)
        if case is None:
            return app.page(req, "Not found", f'<div class="error">No case {esc(case_id)}.</div>', 404)
        engineers = conn.execute("SELECT * FROM engineers ORDER BY name").fetchall()
        runbooks = conn.execute("SELECT id, title FROM runbooks ORDER BY id").fetchall()
        events = conn.execute("SELECT * FROM case_events WHERE case_id = ? ORDER BY seq", (case_id,)).fetchall()

    def select(name, label, choices, current):
        opts = '<option value="">-- choose --</option>' + "".join(
            f'<option value="{esc(v)}"{" selected" if v == current else ""}>{esc(t)}</option>' for v, t in choices)
        return f'<label for="{name}">{label}</label><select id="{name}" name="{name}">{opts}</select>'

    body = (f'<div class="card"><p><b>Customer:</b> {esc(case["customer"])} &nbsp; <b>Priority:</b> '
            f'{esc(case["priority"])} &nbsp; <b>Status:</b> <span class="status" id="case-status">{esc(case["status"])}'
            f'</span></p><p><b>{esc(case["title"])}</b></p><p><b>Symptom:</b> {esc(case["symptom"])}</p></div>')
    if case["status"] == "resolved":
        body += (f'<div class="card"><p><b>Runbook:</b> {esc(case["runbook"])}</p><p><b>Resolution note:</b> '
                 f'{esc(case["resolution_note"])}</p></div>')
    else:
        body += (f'<form method="post" action="/cases/{esc(case_id)}/draft" class="card" id="case-form">'
                 f'{app.csrf_field(req)}<h2>Resolution</h2>'
                 + select("runbook", "Runbook", [(r["id"], f'{r["id"]} - {r["title"]}') for r in runbooks],
                          case["runbook"])
                 + select("assignee", "Assignee", [(e["id"], f'{e["name"]} ({e["team"]})') for e in engineers],
                          case["assignee"])
                 + '<label for="resolution_note">Resolution note</label><textarea id="resolution_note" '
                 f'name="resolution_note">{esc(case["resolution_note"] or "")}</textarea>'
                 + select("escalation", "Escalation review", list(ESCALATION.items()), case["escalation"])
                 + '<div><button type="submit" id="save-draft">Save draft</button></div></form>'
                 f'<form method="post" action="/cases/{esc(case_id)}/resolve" class="card">{app.csrf_field(req)}'
                 '<p class="muted">A case is resolved from its saved draft: save the draft first.</p>'
                 '<button type="submit" id="resolve">Resolve case</button></form>')
    body += "<h2>History</h2><table><tr><th>#</th><th>Action</th><th>From</th><th>To</th><th>By</th></tr>" + "".join(
        f'<tr><td>{e["seq"]}</td><td>{esc(e["action"])}</td><td>{esc(e["from_status"])}</td>'
        f'<td>{esc(e["to_status"])}</td><td>{esc(e["actor"])}</td></tr>' for e in events) + "</table>"
    return app.page(req, f"Case {case_id}", body)


def _event(conn, case_id, action, before, after, actor, snapshot):
    seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM case_events WHERE case_id = ?", (case_id,)).fetchone()[0]
    conn.execute("INSERT INTO case_events VALUES (?, ?, ?, ?, ?, ?, ?)",
                 (case_id, seq, action, before, after, actor, json.dumps(snapshot, sort_keys=True)))


@app.route("POST", "/cases/<case_id>/draft")
def save_draft(req, case_id):
    with app.db() as conn:
        case = _case(conn, case_id)
        if case is None or case["status"] == "resolved":
            app.flash(req, f"Case {case_id} cannot be edited.")
            return redirect(f"/cases/{case_id}")
        values = {f: (req.form.get(f) or "").strip() or None for f in FIELDS}
        if values["runbook"] and not conn.execute("SELECT 1 FROM runbooks WHERE id = ?", (values["runbook"],)).fetchone():
            values["runbook"] = None
        if values["assignee"] and not conn.execute("SELECT 1 FROM engineers WHERE id = ?",
                                                   (values["assignee"],)).fetchone():
            values["assignee"] = None
        if values["escalation"] not in ESCALATION:
            values["escalation"] = None
        conn.execute("UPDATE cases SET runbook = ?, assignee = ?, resolution_note = ?, escalation = ?, "
                     "status = 'draft' WHERE id = ?", (*[values[f] for f in FIELDS], case_id))
        _event(conn, case_id, "draft_saved", case["status"], "draft", req.session["user"], values)
    app.flash(req, f"Draft of {case_id} saved.")
    return redirect(f"/cases/{case_id}")


@app.route("POST", "/cases/<case_id>/resolve")
def resolve(req, case_id):
    with app.db() as conn:
        case = _case(conn, case_id)
        if case is None or case["status"] != "draft":
            app.flash(req, f"Case {case_id} has no saved draft: save the draft before resolving.")
            return redirect(f"/cases/{case_id}")
        missing = [f.replace("_", " ") for f in FIELDS if not case[f]]
        if missing:
            app.flash(req, f"The saved draft lacks: {', '.join(missing)}. Complete and save it first.")
            return redirect(f"/cases/{case_id}")
        conn.execute("UPDATE cases SET status = 'resolved' WHERE id = ?", (case_id,))
        _event(conn, case_id, "resolved", "draft", "resolved", req.session["user"], {f: case[f] for f in FIELDS})
    app.flash(req, f"Case {case_id} resolved.")
    return redirect(f"/cases/{case_id}")


@app.route("GET", "/runbooks")
def runbooks(req):
    with app.db() as conn:
        rows = conn.execute("SELECT id, title FROM runbooks ORDER BY id").fetchall()
    body = "<table><tr><th>Runbook</th><th>Title</th></tr>" + "".join(
        f'<tr><td><a href="/runbooks/{esc(r["id"])}">{esc(r["id"])}</a></td><td>{esc(r["title"])}</td></tr>'
        for r in rows) + "</table>"
    return app.page(req, "Runbooks", body)


@app.route("GET", "/runbooks/<rb_id>")
def runbook(req, rb_id):
    with app.db() as conn:
        r = conn.execute("SELECT * FROM runbooks WHERE id = ?", (rb_id,)).fetchone()
    if r is None:
        return app.page(req, "Not found", f'<div class="error">No runbook {esc(rb_id)}.</div>', 404)
    body = (f'<div class="card"><h2>{esc(r["title"])}</h2><p><b>Symptoms:</b> {esc(r["symptoms"])}</p>'
            f'<p><b>Steps:</b> {esc(r["steps"])}</p><p><b>Resolution note to record:</b> {esc(r["note"])}</p>'
            f'<p><b>Escalation review:</b> {esc(ESCALATION[r["escalation"]])}</p></div>')
    return app.page(req, f"Runbook {rb_id}", body)


if __name__ == "__main__":
    app.serve(int(os.environ.get("APP_PORT", "8080")))
