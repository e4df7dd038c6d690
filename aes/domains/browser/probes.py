"""The browser domain's wrong-work probe: a partial form (``browser.partial_rewarded``).

An RL policy that does part of the work still saves a form: the change reference typed and the
settings left as they were, one of four tickets ticked, the refund's quantity set and its reason not.
The probe derives those attempts from the reference itself, through the application, so every state
it leaves is one the app accepts. In the probe's own container (as root) the browser executables
are wrapped to send their traffic, loopback included, through a proxy that passes everything on but
a form POST (``application/x-www-form-urlencoded``). Of such a POST it knows the form as the page
served it (the HTML responses it passed on), so it knows what the reference *changed*: each field
whose submitted value differs from the value the page gave it (a text typed, a box ticked, an option
picked; each ticked or unticked box of a group is one change; the submitting button and unchanged
fields are not). A form with two or more changes is first sent with only part of them, the others
put back as served: the changes of one field alone, then of every two fields, and so on (each field
with its first change only: one box of a group ticked), up to :data:`MAX_TRIES` tries; the
first part the app accepts (it answers below 400: the redirect of ``kit/webapp.py``'s
post-redirect-get, or a review page; a refusal, the form re-rendered with its errors and a 4xx
status, saves nothing) is what the browser gets, and the reference goes on from there. Only where no
part is accepted does the form go as the reference filled it. The reference's ``solve.sh`` runs as the agent would; whatever state it leaves
(it may stop early, on a page it did not expect) the verifier scores. Tests that give that 0.5 or
more pay for part of the work and the task is rejected.

The probe cannot tell (and gives no reason) when no browser was wrapped, when the reference sent no
form through it, or when no form had a part the app accepted (every form had one change, or needed
all of them).
"""

from __future__ import annotations

import json

from aes.sandbox import AgentRun, OracleAgent
from aes.tasks import Reason

PARTIAL_MAX = 0.5
"""A partial attempt earning this much or more is rejected."""
MAX_TRIES = 32
"""At most this many parts of one form are sent before the form goes as the reference filled it."""
DIR = "/run/aes-partial"
LOG = f"{DIR}/posts.jsonl"
PROXY_PATH = f"{DIR}/proxy.py"
PORT_FILE = f"{DIR}/port"

PROXY = r'''
import html.parser, http.client, http.server, itertools, json, sys, threading, urllib.parse
LOG, PORT_FILE, MAX_TRIES = %r, %r, %d
BUTTONS = {"submit", "button", "image", "reset", "file"}
forms, lock = {}, threading.Lock()


class Forms(html.parser.HTMLParser):
    """The forms of a page: action, method, the pairs it submits untouched, its buttons' names."""

    def __init__(self, base):
        super().__init__(convert_charrefs=True)
        self.base, self.found, self.form, self.select, self.text, self.option = base, [], None, None, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.form = {"action": urllib.parse.urljoin(self.base, a.get("action") or self.base),
                         "method": (a.get("method") or "get").lower(), "pairs": [], "buttons": set(), "area": set()}
            self.found.append(self.form)
        elif self.form is None:
            return
        elif tag == "input":
            kind, name = (a.get("type") or "text").lower(), a.get("name")
            if not name:
                return
            if kind in BUTTONS:
                self.form["buttons"].add(name)
            elif kind in ("checkbox", "radio"):
                if "checked" in a:
                    self.form["pairs"].append([name, a.get("value") or "on"])
            else:
                self.form["pairs"].append([name, a.get("value") or ""])
        elif tag == "button" and a.get("name"):
            self.form["buttons"].add(a["name"])
        elif tag == "textarea" and a.get("name"):
            self.text = [a["name"], ""]
            self.form["area"].add(a["name"])
        elif tag == "select" and a.get("name"):
            self.select = {"name": a["name"], "multiple": "multiple" in a, "values": [], "chosen": []}
        elif tag == "option" and self.select is not None:
            self.end_option()
            self.option = [a.get("value"), ""]
            if "selected" in a:
                self.select["chosen"].append(len(self.select["values"]))

    def end_option(self):
        if self.option is not None and self.select is not None:
            value, text = self.option
            self.select["values"].append(value if value is not None else " ".join(text.split()))
        self.option = None

    def handle_data(self, data):
        if self.text is not None:
            self.text[1] += data
        elif self.option is not None:
            self.option[1] += data

    def handle_endtag(self, tag):
        if tag == "form":
            self.form = None
        elif tag == "option":
            self.end_option()
        elif tag == "textarea" and self.text is not None and self.form is not None:
            name, value = self.text
            self.form["pairs"].append([name, value[1:] if value.startswith("\n") else value])
            self.text = None
        elif tag == "select" and self.select is not None:
            self.end_option()
            s, self.select = self.select, None
            chosen = s["chosen"] if s["multiple"] else (s["chosen"][-1:] or ([0] if s["values"] else []))
            if self.form is not None:
                self.form["pairs"] += [[s["name"], s["values"][i]] for i in chosen]


def norm(value):
    return value.replace("\r\n", "\n")


def changes(served, sent):
    """What was changed between the form as served and as sent: ("set", name, old, new) of a field
    given once in both, ("add"/"drop", name, value) of a box ticked or unticked in a group."""
    buttons, names = served["buttons"], []
    for name, _ in [*sent, *served["pairs"]]:
        if name not in names and name not in buttons:
            names.append(name)
    out = []
    for name in names:
        old = [norm(v) for n, v in served["pairs"] if n == name]
        new = [norm(v) for n, v in sent if n == name]
        if len(old) == 1 and len(new) == 1:
            if old != new:
                out.append(("set", name, old[0], new[0]))
            continue
        for v in new:
            if v in old:
                old.remove(v)
            else:
                out.append(("add", name, v))
        out += [("drop", name, v) for v in old]
    return out


def variant(sent, edits, keep, areas):
    """``sent`` with every change not in ``keep`` put back as the page served it."""
    pairs = [list(p) for p in sent]
    for i, edit in enumerate(edits):
        if i in keep:
            continue
        if edit[0] == "set":
            for p in pairs:
                if p[0] == edit[1] and norm(p[1]) == edit[3]:
                    p[1] = edit[2].replace("\n", "\r\n") if edit[1] in areas else edit[2]
                    break
        elif edit[0] == "add":
            for j, p in enumerate(pairs):
                if p[0] == edit[1] and norm(p[1]) == edit[2]:
                    del pairs[j]
                    break
        else:
            pairs.append([edit[1], edit[2]])
    return pairs


def describe(edit):
    return f"{edit[1]}={edit[3]!r}" if edit[0] == "set" else f"{edit[1]} {'+' if edit[0] == 'add' else '-'}{edit[2]!r}"


def parts(edits):
    """The parts of ``edits`` to try, smallest first: every set of fields but the whole, each field
    with its first change only (one box of a group ticked); at most MAX_TRIES of them."""
    fields = {}
    for i, edit in enumerate(edits):
        fields.setdefault(edit[1], []).append(i)
    firsts, count = [group[0] for group in fields.values()], 0
    for size in range(1, len(firsts) + 1):
        for chosen in itertools.combinations(firsts, size):
            if len(chosen) == len(edits):
                continue  # the whole form: what the reference sent
            count += 1
            if count > MAX_TRIES:
                return
            yield set(chosen)


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):
        pass

    def send(self, method, url, headers, body):
        parsed = urllib.parse.urlsplit(url)
        conn = http.client.HTTPConnection(parsed.hostname, parsed.port or 80, timeout=60)
        path = (parsed.path or "/") + (("?" + parsed.query) if parsed.query else "")
        hdrs = {k: v for k, v in headers.items() if k.lower() not in ("proxy-connection", "connection",
                                                                      "keep-alive", "content-length")}
        hdrs["Connection"] = "close"
        if body is not None:
            hdrs["Content-Length"] = str(len(body))
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, resp.reason, resp.getheaders(), data

    def relay(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else (b"" if self.command == "POST" else None)
        headers = dict(self.headers.items())
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        try:
            answer = None
            if self.command == "POST" and kind == "application/x-www-form-urlencoded":
                try:
                    answer = self.partial(headers, body)
                except OSError:
                    raise
                except Exception as exc:  # the post goes as the reference filled it; the log says why
                    self.log({"action": urllib.parse.urlsplit(self.path).path, "error": repr(exc)})
            status, reason, out_headers, data = answer or self.send(self.command, self.path, headers, body)
        except OSError as exc:
            self.send_error(502, str(exc))
            return
        ctype = dict((k.lower(), v) for k, v in out_headers).get("content-type", "")
        dest = (self.headers.get("Sec-Fetch-Dest") or "document").lower()
        if "html" in ctype and dest in ("document", "iframe", "frame"):  # a page shown, not a favicon's redirect
            page = Forms(self.path)
            try:
                page.feed(data.decode("utf-8", "replace"))
            except Exception:
                pass
            with lock:
                for form in page.found:
                    if form["method"] == "post":
                        forms[form["action"]] = [form, *forms.get(form["action"], [])][:20]
        self.send_response(status, reason)
        for k, v in out_headers:
            if k.lower() not in ("transfer-encoding", "connection", "content-length", "keep-alive"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def partial(self, headers, body):
        sent = urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
        names = {n for n, _ in sent}
        with lock:  # the latest form of this action that shares the most fields with the post
            served = sorted(forms.get(self.path, []), key=lambda f: -len(names & {n for n, _ in f["pairs"]}))
            served = [f for f in served[:1] if names & {n for n, _ in f["pairs"]}]
        record = {"action": urllib.parse.urlsplit(self.path).path, "known": bool(served), "tries": 0}
        if served:
            edits = changes(served[0], sent)
            record["changes"] = [describe(e) for e in edits]
            for keep in parts(edits):
                pairs = variant(sent, edits, keep, served[0]["area"])
                cut = urllib.parse.urlencode([tuple(p) for p in pairs]).encode()
                answer = self.send("POST", self.path, headers, cut)
                record["tries"] += 1
                if answer[0] < 400:
                    record["kept"] = [describe(edits[i]) for i in sorted(keep)]
                    record["status"] = answer[0]
                    self.log(record)
                    return answer
        answer = self.send("POST", self.path, headers, body)
        record["status"] = answer[0]
        self.log(record)
        return answer

    def log(self, record):
        with lock, open(LOG, "a") as log:
            log.write(json.dumps(record) + "\n")

    def do_CONNECT(self):
        self.send_error(405, "no tunnels here")

    do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = relay


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
open(PORT_FILE + ".tmp", "w").write(str(server.server_address[1]))
__import__("os").replace(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
''' % (LOG, PORT_FILE, MAX_TRIES)

WRAP = r'''set -e
mkdir -p %(dir)s && chmod 755 %(dir)s && : > %(log)s && chmod 644 %(log)s
printf '%%s' "$0" > %(proxy)s
setsid python3 %(proxy)s > %(dir)s/proxy.log 2>&1 < /dev/null &
for i in $(seq 100); do [ -s %(port)s ] && break; sleep 0.1; done
[ -s %(port)s ] || { echo "the proxy did not start:"; cat %(dir)s/proxy.log; exit 1; }
found=""
for name in chromium chromium-browser google-chrome google-chrome-stable chrome headless_shell; do
  exe=$(command -v "$name" 2>/dev/null) && found="$found $(readlink -f "$exe")"
done
for root in /ms-playwright /root/.cache/ms-playwright /home/*/.cache/ms-playwright; do
  [ -d "$root" ] && found="$found $(find "$root" -type f \( -name chrome -o -name headless_shell \) 2>/dev/null)"
done
for exe in $found; do
  [ -f "$exe" ] && [ ! -e "$exe.aes-real" ] || continue
  mv "$exe" "$exe.aes-real"
  printf '#!/bin/sh\nexec %%s.aes-real "$@" --proxy-server=http://127.0.0.1:%%s "--proxy-bypass-list=<-loopback>"\n' \
    "$exe" "$(cat %(port)s)" > "$exe"
  chmod 755 "$exe"
  echo "wrapped $exe"
done
''' % {"dir": DIR, "log": LOG, "proxy": PROXY_PATH, "port": PORT_FILE}


class PartialForm(OracleAgent):
    """A check agent: the reference's solve.sh, its browser's form posts cut to the smallest part
    the app accepts. ``info``: ``wrapped`` (the browser executables), ``posts`` (form posts seen),
    ``partial`` (the posts sent with part of their changes: action, changes, kept), ``solve_exit``."""

    name = "browser-partial-form-probe"

    def run(self, task, container, timeout: float) -> AgentRun:
        wrap = container.exec(["sh", "-c", WRAP, PROXY], 60, user="0")
        info: dict = {"wrapped": [line[len("wrapped "):] for line in wrap.output.splitlines()
                                  if line.startswith("wrapped ")], "wrap_exit": wrap.exit_code}
        if wrap.exit_code != 0:
            info["wrap_output"] = wrap.output[-600:]
        run = super().run(task, container, timeout)
        log = container.exec(["cat", LOG], 30, user="0")
        posts = []
        for line in log.output.splitlines():
            try:
                posts.append(json.loads(line))
            except ValueError:
                continue
        info.update(posts=len(posts), partial=[p for p in posts if "kept" in p], solve_exit=run.exit_code)
        run.info = {**run.info, **info}
        return run


def partial_reasons(trial) -> list[Reason]:
    """``browser.partial_rewarded`` when the partial-form attempt earned :data:`PARTIAL_MAX` or more."""
    info = trial.agent_info
    if not info.get("wrapped") or not info.get("partial") or trial.reward is None:
        return []  # cannot tell: no browser wrapped, or no form had a part the app accepted
    if trial.reward >= PARTIAL_MAX:
        cut = "; ".join(f"{p['action']}: only {', '.join(p['kept'])} of {len(p['changes'])} changes "
                        f"({', '.join(p['changes'])})" for p in info["partial"][:4])
        return [Reason("browser.partial_rewarded",
                       f"its tests pay for a partial form: the reference with each form saved with only part of "
                       f"its changes (the smallest part the app accepts: {cut})"[:900] +
                       f" earns {trial.reward:.2f} (at least {PARTIAL_MAX}); the changes the task asks for must "
                       "carry the reward: gate the bookkeeping tests (the change reference cited, what was "
                       "already right, the rest untouched) on all of them being right, as the task format's "
                       "test.sh does")]
    return []
