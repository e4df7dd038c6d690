"""Tessellate admin console: tenants, their profiles and a settings form with server-side validation rules."""

import ipaddress
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from webapp import App, esc, redirect  # noqa: E402

app = App("Tessellate Admin", os.environ.get("APP_DB", "/srv/admin/app.db"),
          nav=[("Tenants", "/tenants"), ("Policies", "/policies"), ("Audit log", "/audit")])
RETENTION = (30, 90, 180, 365, 730)
DOMAIN = re.compile(r"^(?=.{4,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$")
CHANGE = re.compile(r"^CHG-\d{4}$")
SETTINGS = ("session_timeout_minutes", "password_min_length", "mfa_required", "retention_days", "allowed_domains",
            "ip_allowlist", "support_contact")


@app.route("GET", "/")
def home(req):
    return redirect("/tenants")


@app.route("GET", "/tenants")
def tenants(req):
    with app.db() as conn:
        rows = conn.execute("SELECT * FROM tenants ORDER BY name").fetchall()
    body = "<table><tr><th>Tenant</th><th>Slug</th><th>Plan</th><th></th></tr>" + "".join(
        f'<tr><td><a href="/tenants/{r["slug"]}">{esc(r["name"])}</a></td><td>{esc(r["slug"])}</td>'
        f'<td>{esc(r["plan"])}</td><td><a href="/tenants/{r["slug"]}/settings">Settings</a></td></tr>'
        for r in rows) + "</table>"
    return app.page(req, "Tenants", body)


@app.route("GET", "/tenants/<slug>")
def profile(req, slug):
    with app.db() as conn:
        t = conn.execute("SELECT * FROM tenants WHERE slug = ?", (slug,)).fetchone()
    if t is None:
        return app.page(req, "Not found", f'<div class="error">No tenant {esc(slug)}.</div>', 404)
    domains = "".join(f"<li>{esc(d)}</li>" for d in t["verified_domains"].splitlines())
    body = (f'<div class="card"><p><b>Plan:</b> {esc(t["plan"])}</p><p><b>Verified domains</b></p><ul id="verified">'
            f'{domains}</ul><p><a href="/tenants/{slug}/settings">Security settings</a></p></div>')
    return app.page(req, f'{t["name"]} - profile', body)


def _form(req, t, values, errors):
    def number(name, label, hint):
        return (f'<label for="{name}">{label}</label><input type="number" id="{name}" name="{name}" '
                f'value="{esc(values[name])}"><div class="muted">{hint}</div>')

    retention = "".join(f'<option value="{d}"{" selected" if str(values["retention_days"]) == str(d) else ""}>'
                        f"{d} days</option>" for d in RETENTION)
    checked = " checked" if str(values["mfa_required"]) in ("1", "on") else ""
    problems = "".join(f'<div class="error">{esc(e)}</div>' for e in errors)
    return (f'{problems}<form method="post" action="/tenants/{t["slug"]}/settings" class="card" id="settings-form">'
            f'{app.csrf_field(req)}'
            + number("session_timeout_minutes", "Idle session timeout (minutes)", "5 to 240, in steps of 5.")
            + number("password_min_length", "Password minimum length", "8 to 64 characters.")
            + f'<label><input type="checkbox" id="mfa_required" name="mfa_required"{checked}> Require multi-factor '
              'authentication</label>'
            + f'<label for="retention_days">Audit data retention</label><select id="retention_days" '
              f'name="retention_days">{retention}</select>'
            + '<label for="allowed_domains">Allowed sign-in domains</label><textarea id="allowed_domains" '
              f'name="allowed_domains">{esc(values["allowed_domains"])}</textarea>'
              '<div class="muted">One domain per line, lower case.</div>'
            + '<label for="ip_allowlist">IP allowlist</label><textarea id="ip_allowlist" name="ip_allowlist">'
              f'{esc(values["ip_allowlist"])}</textarea><div class="muted">One IPv4 network (CIDR) per line; empty '
              'allows every address.</div>'
            + '<label for="support_contact">Support contact</label><input type="email" id="support_contact" '
              f'name="support_contact" value="{esc(values["support_contact"])}">'
            + '<label for="change_ref">Change request</label><input type="text" id="change_ref" name="change_ref" '
              f'value="{esc(values.get("change_ref", ""))}" placeholder="CHG-0000">'
            + '<div><button type="submit" id="save-settings">Save settings</button></div></form>')


@app.route("GET", "/tenants/<slug>/settings")
def settings_page(req, slug):
    with app.db() as conn:
        t = conn.execute("SELECT * FROM tenants WHERE slug = ?", (slug,)).fetchone()
        s = conn.execute("SELECT * FROM settings WHERE slug = ?", (slug,)).fetchone()
    if t is None or s is None:
        return app.page(req, "Not found", f'<div class="error">No tenant {esc(slug)}.</div>', 404)
    return app.page(req, f'{t["name"]} - security settings', _form(req, t, dict(s), []))


def _validate(form):
    """(clean values, errors) of a submitted settings form."""
    errors, clean = [], {}
    for name, low, high, step in (("session_timeout_minutes", 5, 240, 5), ("password_min_length", 8, 64, 1)):
        raw = form.get(name, "").strip()
        if not re.fullmatch(r"\d+", raw) or not low <= int(raw) <= high or int(raw) % step:
            errors.append(f"{name.replace('_', ' ').capitalize()}: a whole number from {low} to {high}"
                          + (f" in steps of {step}" if step > 1 else "") + f" (got {raw!r}).")
        else:
            clean[name] = int(raw)
    clean["mfa_required"] = 1 if form.get("mfa_required") in ("on", "1", "true") else 0
    retention = form.get("retention_days", "")
    if not retention.isdigit() or int(retention) not in RETENTION:
        errors.append("Audit data retention: choose one of the listed periods.")
    else:
        clean["retention_days"] = int(retention)
    domains = [d.strip() for d in form.get("allowed_domains", "").replace("\r", "").split("\n") if d.strip()]
    bad = [d for d in domains if not DOMAIN.match(d)]
    if bad:
        errors.append(f"Allowed sign-in domains: not a lower-case domain name: {', '.join(bad)} (one per line).")
    elif len(set(domains)) != len(domains):
        errors.append("Allowed sign-in domains: a domain is listed twice.")
    elif not domains:
        errors.append("Allowed sign-in domains: list at least one domain.")
    clean["allowed_domains"] = "\n".join(domains)
    nets = [n.strip() for n in form.get("ip_allowlist", "").replace("\r", "").split("\n") if n.strip()]
    for net in nets:
        try:
            ipaddress.IPv4Network(net, strict=True)
        except ValueError:
            errors.append(f"IP allowlist: {net!r} is not an IPv4 network in CIDR form.")
    clean["ip_allowlist"] = "\n".join(nets)
    contact = form.get("support_contact", "").strip()
    if not EMAIL.match(contact):
        errors.append("Support contact: an e-mail address.")
    clean["support_contact"] = contact
    if not CHANGE.match(form.get("change_ref", "").strip()):
        errors.append("Change request: the number of the approved change, e.g. CHG-1234.")
    return clean, errors


@app.route("POST", "/tenants/<slug>/settings")
def save(req, slug):
    with app.db() as conn:
        t = conn.execute("SELECT * FROM tenants WHERE slug = ?", (slug,)).fetchone()
        before = conn.execute("SELECT * FROM settings WHERE slug = ?", (slug,)).fetchone()
        if t is None or before is None:
            return app.page(req, "Not found", f'<div class="error">No tenant {esc(slug)}.</div>', 404)
        clean, errors = _validate(req.form)
        if errors:
            values = {**dict(before), **{k: req.form.get(k, "") for k in SETTINGS}, "change_ref": req.form.get("change_ref", "")}
            values["mfa_required"] = req.form.get("mfa_required", "")
            return app.page(req, f'{t["name"]} - security settings', _form(req, t, values, errors), 422)
        changes = {k: [before[k], clean[k]] for k in SETTINGS if before[k] != clean[k]}
        conn.execute("UPDATE settings SET " + ", ".join(f"{k} = ?" for k in SETTINGS) + " WHERE slug = ?",
                     (*[clean[k] for k in SETTINGS], slug))
        seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM audit").fetchone()[0]
        conn.execute("INSERT INTO audit VALUES (?, ?, ?, ?, ?)", (seq, slug, req.session["user"],
                                                                  req.form["change_ref"].strip(),
                                                                  json.dumps(changes, sort_keys=True)))
    app.flash(req, f"Settings of {t['name']} saved ({len(changes)} changed).")
    return redirect(f"/tenants/{slug}/settings")


@app.route("GET", "/policies")
def policies(req):
    with app.db() as conn:
        rows = conn.execute("SELECT * FROM policies ORDER BY id").fetchall()
    body = "<table><tr><th>Policy</th><th>Title</th><th>Status</th></tr>" + "".join(
        f'<tr><td><a href="/policies/{r["id"]}">{r["id"]}</a></td><td>{esc(r["title"])}</td><td>{r["status"]}</td></tr>'
        for r in rows) + "</table>"
    return app.page(req, "Policies", body)


@app.route("GET", "/policies/<pid>")
def policy(req, pid):
    with app.db() as conn:
        r = conn.execute("SELECT * FROM policies WHERE id = ?", (pid,)).fetchone()
    if r is None:
        return app.page(req, "Not found", f'<div class="error">No policy {esc(pid)}.</div>', 404)
    items = "".join(f"<li>{esc(line)}</li>" for line in r["body"].splitlines())
    return app.page(req, f'{r["id"]}: {r["title"]}', f'<div class="card"><p>Status: {r["status"]}</p><ul>{items}</ul></div>')


@app.route("GET", "/audit")
def audit(req):
    with app.db() as conn:
        rows = conn.execute("SELECT * FROM audit ORDER BY seq DESC").fetchall()
    body = "<table><tr><th>#</th><th>Tenant</th><th>By</th><th>Change</th><th>Changes</th></tr>" + "".join(
        f'<tr><td>{r["seq"]}</td><td>{esc(r["slug"])}</td><td>{esc(r["actor"])}</td><td>{esc(r["change_ref"])}</td>'
        f'<td>{esc(r["changes"])}</td></tr>' for r in rows) + "</table>"
    return app.page(req, "Audit log", body)


if __name__ == "__main__":
    app.serve(int(os.environ.get("APP_PORT", "8080")))
