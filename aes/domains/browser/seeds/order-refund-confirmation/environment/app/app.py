"""Northwind order desk: orders, the customer inbox and a three-step refund (items, method, confirmation)."""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from webapp import App, esc, redirect  # noqa: E402

app = App("Northwind Order Desk", os.environ.get("APP_DB", "/srv/desk/app.db"),
          nav=[("Orders", "/orders"), ("Inbox", "/inbox"), ("Refunds", "/refunds")])
REASONS = {"damaged_in_transit": "Damaged in transit", "not_as_described": "Not as described",
           "changed_mind": "Changed mind", "late_delivery": "Late delivery"}
METHODS = {"original_payment": "Original payment method", "store_credit": "Store credit"}


def money(cents):
    return f"${cents / 100:,.2f}"


def _not_found(req, what):
    return app.page(req, "Not found", f'<div class="error">No {esc(what)}.</div>', 404)


def _event(conn, rid, action, actor):
    seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM refund_events").fetchone()[0]
    conn.execute("INSERT INTO refund_events VALUES (?, ?, ?, ?)", (seq, rid, action, actor))


@app.route("GET", "/")
def home(req):
    return redirect("/orders")


@app.route("GET", "/orders")
def orders(req):
    with app.db() as conn:
        rows = conn.execute("SELECT * FROM orders ORDER BY id").fetchall()
    body = "<table><tr><th>Order</th><th>Customer</th><th>Placed</th><th>Paid with</th></tr>" + "".join(
        f'<tr><td><a href="/orders/{r["id"]}">{r["id"]}</a></td><td>{esc(r["customer"])}</td>'
        f'<td>{r["placed_on"]}</td><td>{esc(r["payment"])}</td></tr>' for r in rows) + "</table>"
    return app.page(req, "Orders", body)


@app.route("GET", "/orders/<oid>")
def order(req, oid):
    with app.db() as conn:
        o = conn.execute("SELECT * FROM orders WHERE id = ?", (oid,)).fetchone()
        lines = conn.execute("SELECT * FROM order_lines WHERE order_id = ? ORDER BY line", (oid,)).fetchall()
        refunds = conn.execute("SELECT * FROM refunds WHERE order_id = ? ORDER BY id", (oid,)).fetchall()
    if o is None:
        return _not_found(req, f"order {oid}")
    items = "".join(f'<tr><td>{r["line"]}</td><td>{r["sku"]}</td><td>{esc(r["item"])}</td><td>{r["quantity"]}</td>'
                    f'<td>{money(r["unit_cents"])}</td></tr>' for r in lines)
    refs = "".join(f'<li><a href="/refunds/{r["id"]}">Refund #{r["id"]}</a>: {r["status"]}, '
                   f'{money(r["amount_cents"])}</li>' for r in refunds) or "<li>none</li>"
    body = (f'<div class="card"><p><b>Customer:</b> {esc(o["customer"])}</p><p><b>Placed:</b> {o["placed_on"]}</p>'
            f'<p><b>Paid with:</b> {esc(o["payment"])}</p></div><table><tr><th>Line</th><th>SKU</th><th>Item</th>'
            f'<th>Qty</th><th>Unit price</th></tr>{items}</table><h2>Refunds</h2><ul>{refs}</ul>'
            f'<p><a id="start-refund" href="/orders/{oid}/refund">Start a refund</a></p>')
    return app.page(req, f"Order {oid}", body)


@app.route("GET", "/inbox")
def inbox(req):
    with app.db() as conn:
        rows = conn.execute("SELECT * FROM messages ORDER BY id DESC").fetchall()
    body = "<table><tr><th>From</th><th>Subject</th><th>Order</th></tr>" + "".join(
        f'<tr><td>{esc(r["sender"])}</td><td><a href="/inbox/{r["id"]}">{esc(r["subject"])}</a></td>'
        f'<td>{r["order_id"]}</td></tr>' for r in rows) + "</table>"
    return app.page(req, "Inbox", body)


@app.route("GET", "/inbox/<mid>")
def message(req, mid):
    with app.db() as conn:
        m = conn.execute("SELECT * FROM messages WHERE id = ?", (mid,)).fetchone()
    if m is None:
        return _not_found(req, "such message")
    body = (f'<div class="card" id="message"><p><b>From:</b> {esc(m["sender"])}</p><p><b>Order:</b> '
            f'<a href="/orders/{m["order_id"]}">{m["order_id"]}</a></p><p>{esc(m["body"])}</p></div>')
    return app.page(req, m["subject"], body)


def _items_form(req, oid, lines, error=""):
    rows = "".join(f'<tr><td>{esc(r["item"])} ({r["sku"]})</td><td>{r["quantity"]}</td><td>{money(r["unit_cents"])}'
                   f'</td><td><input type="number" min="0" max="{r["quantity"]}" id="qty-{r["line"]}" '
                   f'name="qty_{r["line"]}" value="0" aria-label="Refund quantity of line {r["line"]}: '
                   f'{esc(r["item"])}"></td></tr>' for r in lines)
    reasons = '<option value="">(choose)</option>' + "".join(f'<option value="{k}">{v}</option>'
                                                             for k, v in REASONS.items())
    body = (f'<div class="error">{esc(error)}</div>' if error else "") + (
        f'<p class="muted">Step 1 of 3: items. Then the refund method, then the confirmation.</p>'
        f'<form method="post" action="/orders/{oid}/refund" class="card" id="refund-items">{app.csrf_field(req)}'
        f'<table><tr><th>Item</th><th>Ordered</th><th>Unit price</th><th>Refund quantity</th></tr>{rows}</table>'
        f'<label for="reason">Reason</label><select id="reason" name="reason">{reasons}</select>'
        f'<div><button type="submit" id="continue">Continue</button></div></form>')
    return app.page(req, f"Refund for order {oid}", body, 422 if error else 200)


@app.route("GET", "/orders/<oid>/refund")
def refund_start(req, oid):
    with app.db() as conn:
        lines = conn.execute("SELECT * FROM order_lines WHERE order_id = ? ORDER BY line", (oid,)).fetchall()
    return _items_form(req, oid, lines) if lines else _not_found(req, f"order {oid}")


@app.route("POST", "/orders/<oid>/refund")
def refund_create(req, oid):
    with app.db() as conn:
        lines = conn.execute("SELECT * FROM order_lines WHERE order_id = ? ORDER BY line", (oid,)).fetchall()
        if not lines:
            return _not_found(req, f"order {oid}")
        chosen = {}
        for r in lines:
            raw = req.form.get(f"qty_{r['line']}", "0").strip() or "0"
            if not re.fullmatch(r"\d+", raw) or int(raw) > r["quantity"]:
                return _items_form(req, oid, lines, f"Line {r['line']}: a quantity from 0 to {r['quantity']}.")
            if int(raw):
                chosen[r["line"]] = int(raw)
        if not chosen:
            return _items_form(req, oid, lines, "Choose at least one item to refund.")
        if req.form.get("reason") not in REASONS:
            return _items_form(req, oid, lines, "Choose the reason for the refund.")
        amount = sum(r["unit_cents"] * chosen.get(r["line"], 0) for r in lines)
        rid = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM refunds").fetchone()[0]
        conn.execute("INSERT INTO refunds VALUES (?, ?, 'draft', ?, NULL, ?)", (rid, oid, req.form["reason"], amount))
        conn.executemany("INSERT INTO refund_lines VALUES (?, ?, ?)", [(rid, n, q) for n, q in chosen.items()])
        _event(conn, rid, "draft_created", req.session["user"])
    return redirect(f"/refunds/{rid}")


@app.route("GET", "/refunds")
def refunds(req):
    with app.db() as conn:
        rows = conn.execute("SELECT * FROM refunds ORDER BY id DESC").fetchall()
    body = "<table><tr><th>Refund</th><th>Order</th><th>Status</th><th>Amount</th></tr>" + "".join(
        f'<tr><td><a href="/refunds/{r["id"]}">#{r["id"]}</a></td><td>{r["order_id"]}</td><td>{r["status"]}</td>'
        f'<td>{money(r["amount_cents"])}</td></tr>' for r in rows) + "</table>"
    return app.page(req, "Refunds", body)


def _load(conn, rid):
    r = conn.execute("SELECT * FROM refunds WHERE id = ?", (rid,)).fetchone()
    lines = conn.execute("SELECT l.*, o.item, o.unit_cents FROM refund_lines l JOIN refunds f ON f.id = l.refund_id "
                         "JOIN order_lines o ON o.order_id = f.order_id AND o.line = l.line WHERE l.refund_id = ? "
                         "ORDER BY l.line", (rid,)).fetchall()
    return r, lines


def _summary(r, lines):
    items = "".join(f'<li>{q["quantity"]} x {esc(q["item"])} ({money(q["unit_cents"])} each)</li>' for q in lines)
    method = METHODS.get(r["method"] or "", "not chosen yet")
    return (f'<div class="card" id="summary"><p><b>Order:</b> <a href="/orders/{r["order_id"]}">{r["order_id"]}</a>'
            f'</p><p><b>Status:</b> <span class="status" id="refund-status">{r["status"]}</span></p><ul>{items}</ul>'
            f'<p><b>Reason:</b> {REASONS.get(r["reason"], r["reason"])}</p><p><b>Method:</b> {method}</p>'
            f'<p><b>Amount:</b> <span id="amount">{money(r["amount_cents"])}</span></p></div>')


@app.route("GET", "/refunds/<rid>")
def refund(req, rid):
    with app.db() as conn:
        r, lines = _load(conn, rid)
    if r is None:
        return _not_found(req, f"refund {rid}")
    body = _summary(r, lines)
    if r["status"] == "draft":
        options = "".join(f'<label><input type="radio" name="method" value="{k}" id="method-{k}"> {v}</label>'
                          for k, v in METHODS.items())
        body += (f'<p class="muted">Step 2 of 3: refund method.</p><form method="post" action="/refunds/{rid}/method" '
                 f'class="card" id="refund-method">{app.csrf_field(req)}{options}'
                 '<div><button type="submit" id="to-confirmation">Continue to confirmation</button></div></form>')
    elif r["status"] == "awaiting_confirmation":
        body += f'<p><a id="confirm-link" href="/refunds/{rid}/confirm">Go to the confirmation step</a></p>'
    return app.page(req, f"Refund #{rid}", body)


@app.route("POST", "/refunds/<rid>/method")
def refund_method(req, rid):
    with app.db() as conn:
        r, _ = _load(conn, rid)
        if r is None or r["status"] != "draft":
            return _not_found(req, f"draft refund {rid}")
        if req.form.get("method") not in METHODS:
            app.flash(req, "Choose a refund method.")
            return redirect(f"/refunds/{rid}")
        conn.execute("UPDATE refunds SET method = ?, status = 'awaiting_confirmation' WHERE id = ?",
                     (req.form["method"], rid))
        _event(conn, rid, "method_chosen", req.session["user"])
    return redirect(f"/refunds/{rid}/confirm")


@app.route("GET", "/refunds/<rid>/confirm")
def confirm_page(req, rid, error=""):
    with app.db() as conn:
        r, lines = _load(conn, rid)
    if r is None or r["status"] != "awaiting_confirmation":
        return _not_found(req, f"refund {rid} awaiting confirmation")
    body = (f'<div class="error">{esc(error)}</div>' if error else "") + _summary(r, lines) + (
        f'<p class="muted">Step 3 of 3: confirmation. Issuing a refund cannot be undone.</p>'
        f'<form method="post" action="/refunds/{rid}/confirm" class="card" id="refund-confirm">{app.csrf_field(req)}'
        '<label for="confirm_order">Type the order number to confirm</label>'
        '<input type="text" id="confirm_order" name="confirm_order" placeholder="NW-0000">'
        '<div><button type="submit" name="decision" value="issue" id="issue">Issue refund</button>'
        '<button type="submit" name="decision" value="cancel" id="cancel">Cancel refund</button></div></form>')
    return app.page(req, f"Confirm refund #{rid}", body, 422 if error else 200)


@app.route("POST", "/refunds/<rid>/confirm")
def confirm(req, rid):
    with app.db() as conn:
        r, _ = _load(conn, rid)
        if r is None or r["status"] != "awaiting_confirmation":
            return _not_found(req, f"refund {rid} awaiting confirmation")
        if req.form.get("decision") == "cancel":
            conn.execute("UPDATE refunds SET status = 'cancelled' WHERE id = ?", (rid,))
            _event(conn, rid, "cancelled", req.session["user"])
            app.flash(req, f"Refund #{rid} cancelled.")
            return redirect(f"/refunds/{rid}")
        if req.form.get("confirm_order", "").strip() != r["order_id"]:
            return confirm_page(req, rid, error="The order number you typed does not match this refund's order.")
        conn.execute("UPDATE refunds SET status = 'issued' WHERE id = ?", (rid,))
        _event(conn, rid, "issued", req.session["user"])
    app.flash(req, f"Refund #{rid} issued.")
    return redirect(f"/refunds/{rid}")


if __name__ == "__main__":
    app.serve(int(os.environ.get("APP_PORT", "8080")))
