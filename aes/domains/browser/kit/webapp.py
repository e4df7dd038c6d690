"""A small web application framework for browser-use tasks (standard library only).

Every seed copies this file next to its ``app.py`` (environment/app/webapp.py), as a proposer's
task may. It gives what a browser meets in a real application, so a solver (or a reference
solution) has to go through the pages: a login with a session cookie, a CSRF token in every
form (a POST without the session's token is refused), POST-redirect-GET with flash messages,
and one HTML layout. The server is threaded (a browser keeps idle connections open) and runs
one request at a time against SQLite, so the data a task saves is what the tests read.

    app = App("Console", db_path="/srv/console/app.db")

    @app.route("GET", "/cases/<case_id>")
    def case(req, case_id): return app.page(req, "Case", "<p>...</p>")

    app.serve(8080)

Nothing here reads the clock or a random source into the database: a task's data is seeded
deterministically by its seed.py, and sessions (random ids, CSRF tokens) live in memory only.
"""

from __future__ import annotations

import hashlib
import html
import re
import secrets
import sqlite3
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator
from urllib.parse import parse_qs, quote, urlsplit

STYLE = """
body{font-family:'DejaVu Sans',sans-serif;margin:0;background:#f4f5f7;color:#1d2430;font-size:14px}
header{background:#24344d;color:#fff;padding:10px 24px;display:flex;gap:24px;align-items:center}
header a{color:#dfe7f3;text-decoration:none}header .brand{font-weight:bold;font-size:16px;color:#fff}
main{padding:20px 24px;max-width:1100px}table{border-collapse:collapse;background:#fff;width:100%}
th,td{border:1px solid #d5d9e0;padding:6px 8px;text-align:left;vertical-align:top}th{background:#e9edf3}
.card{background:#fff;border:1px solid #d5d9e0;padding:14px 18px;margin:12px 0}
.flash{background:#e3f4e6;border:1px solid #9fd3a8;padding:8px 12px;margin:8px 0}
.error{background:#fbe6e6;border:1px solid #e3a4a4;padding:8px 12px;margin:8px 0}
label{display:block;margin:8px 0 2px;font-weight:bold}input[type=text],input[type=password],
input[type=number],input[type=email],select,textarea{width:420px;padding:5px;font-size:14px}
textarea{height:70px}button{margin:10px 8px 0 0;padding:6px 14px;font-size:14px}
.muted{color:#667085}.status{font-weight:bold}
"""


def esc(value) -> str:
    return html.escape("" if value is None else str(value))


def password_hash(password: str) -> str:
    """How seed.py stores a user's password (a fixed salt keeps the seeded data reproducible)."""
    return hashlib.sha256(b"webapp-kit:" + password.encode()).hexdigest()


class Request:
    def __init__(self, method: str, target: str, headers, body: bytes):
        parts = urlsplit(target)
        self.method, self.path = method, parts.path
        self.query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        self.form_lists = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True) if body else {}
        self.form = {k: v[-1] for k, v in self.form_lists.items()}
        self.cookies = dict(c.strip().split("=", 1) for c in (headers.get("Cookie") or "").split(";") if "=" in c)
        self.session: dict = {}


class Response:
    def __init__(self, body: str = "", status: int = 200, location: str | None = None):
        self.body, self.status, self.location = body, status, location
        self.cookies: list[str] = []


def redirect(location: str) -> Response:
    return Response(status=303, location=location)


class App:
    """Routes, sessions, CSRF tokens, the layout and the database of one application."""

    def __init__(self, title: str, db_path: str, nav: list[tuple[str, str]] | None = None,
                 public: tuple[str, ...] = ("/login",)):
        self.title, self.db_path, self.nav, self.public = title, db_path, nav or [], public
        self.routes: list[tuple[str, re.Pattern, object]] = []
        self.sessions: dict[str, dict] = {}
        self.lock = threading.Lock()
        self.route("GET", "/login")(self._login_form)
        self.route("POST", "/login")(self._login)
        self.route("POST", "/logout")(self._logout)

    # -- routing ---------------------------------------------------------------------------------
    def route(self, method: str, pattern: str):
        regex = re.compile("^" + re.sub(r"<(\w+)>", r"(?P<\1>[^/]+)", pattern) + "$")

        def add(fn):
            self.routes.append((method, regex, fn))
            return fn
        return add

    @contextmanager
    def db(self) -> Iterator[sqlite3.Connection]:
        """A connection for one request: committed when the block ends, rolled back on an error."""
        conn = sqlite3.connect(self.db_path)
        conn.row_factory = sqlite3.Row
        try:
            yield conn
            conn.commit()
        finally:
            conn.close()

    def handle(self, req: Request) -> Response:
        sid = req.cookies.get("sid")
        new_cookie = None
        if sid not in self.sessions:
            sid = secrets.token_hex(16)
            self.sessions[sid] = {"csrf": secrets.token_hex(16), "flash": [], "user": None}
            new_cookie = sid
        req.session = self.sessions[sid]
        if req.method == "POST" and req.form.get("csrf") != req.session["csrf"]:
            resp = Response(self.layout(req, "Form expired", '<div class="error">This form has expired or did not '
                                        'come from this site (missing CSRF token). Reload the page and try again.'
                                        "</div>"), status=403)
        elif req.session["user"] is None and req.path not in self.public:
            resp = redirect("/login?next=" + quote(req.path))
        else:
            resp = self._dispatch(req)
        if new_cookie:
            resp.cookies.append(f"sid={new_cookie}; Path=/; HttpOnly; SameSite=Lax")
        return resp

    def _dispatch(self, req: Request) -> Response:
        allowed = False
        for method, regex, fn in self.routes:
            match = regex.match(req.path)
            if match:
                allowed = True
                if method == req.method:
                    return fn(req, **match.groupdict())
        return Response(self.layout(req, "Not found", '<div class="error">No such page.</div>'),
                        status=405 if allowed else 404)

    # -- pages -----------------------------------------------------------------------------------
    def flash(self, req: Request, message: str) -> None:
        req.session["flash"].append(message)

    def csrf_field(self, req: Request) -> str:
        return f'<input type="hidden" name="csrf" value="{req.session["csrf"]}">'

    def layout(self, req: Request, heading: str, body: str) -> str:
        links = "".join(f'<a href="{esc(href)}">{esc(text)}</a>' for text, href in self.nav)
        user = req.session.get("user")
        who = (f'<span class="muted">Signed in as {esc(user)}</span><form method="post" action="/logout" '
               f'style="display:inline">{self.csrf_field(req)}<button>Sign out</button></form>') if user else ""
        flashes = "".join(f'<div class="flash">{esc(m)}</div>' for m in req.session.get("flash", []))
        req.session["flash"] = []
        return (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(heading)} - {esc(self.title)}</title>"
                f"<style>{STYLE}</style></head><body><header><span class='brand'>{esc(self.title)}</span>"
                f"{links if user else ''}<span style='flex:1'></span>{who}</header><main><h1>{esc(heading)}</h1>"
                f"{flashes}{body}</main></body></html>")

    def page(self, req: Request, heading: str, body: str, status: int = 200) -> Response:
        return Response(self.layout(req, heading, body), status=status)

    def _login_form(self, req: Request, error: str = "") -> Response:
        nxt = esc(req.query.get("next") or req.form.get("next") or "/")
        body = (f'{error}<form method="post" action="/login" class="card">{self.csrf_field(req)}'
                f'<input type="hidden" name="next" value="{nxt}">'
                '<label for="username">Username</label><input type="text" id="username" name="username">'
                '<label for="password">Password</label><input type="password" id="password" name="password">'
                '<div><button type="submit" id="sign-in">Sign in</button></div></form>')
        return self.page(req, "Sign in", body, status=401 if error else 200)

    def _login(self, req: Request) -> Response:
        name, password = req.form.get("username", "").strip(), req.form.get("password", "")
        with self.db() as conn:
            row = conn.execute("SELECT password_hash FROM users WHERE username = ?", (name,)).fetchone()
        if row is None or row["password_hash"] != password_hash(password):
            return self._login_form(req, '<div class="error">Unknown username or wrong password.</div>')
        req.session["user"] = name
        nxt = req.form.get("next") or "/"
        return redirect(nxt if nxt.startswith("/") and not nxt.startswith("//") else "/")

    def _logout(self, req: Request) -> Response:
        req.session["user"] = None
        return redirect("/login")

    # -- serving ---------------------------------------------------------------------------------
    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        app = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):
                pass

            def _run(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with app.lock:
                    try:
                        resp = app.handle(Request(self.command, self.path, self.headers, body))
                    except Exception as exc:  # a bug in a page: show it, keep serving
                        resp = Response(f"<h1>Server error</h1><pre>{esc(repr(exc))}</pre>", status=500)
                data = resp.body.encode()
                self.send_response(resp.status)
                if resp.location:
                    self.send_header("Location", resp.location)
                for cookie in resp.cookies:
                    self.send_header("Set-Cookie", cookie)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _run

        server = ThreadingHTTPServer((host, port), Handler)
        server.daemon_threads = True
        server.serve_forever()
