"""One long-lived headless browser inside a task's container, driven one action per exec.

aes's browser action set (aes/agents/browser.py) runs this file inside the container, as the
task's agent user, once per action: ``python3 -c <this source> call <base64 JSON command>``.
The first call starts the session server (this same file, ``serve``) in the background: it
launches Debian's Chromium through Playwright's Python API (``executable_path``, nothing is
downloaded), keeps one page open and answers one JSON command per connection on a unix
socket in the user's ``~/.cache/aes-browser/`` (not carried to the verifier). Each call prints
one line ``__AES_BROWSER_RESULT__ {...}`` with ``ok``, ``text`` (what the model reads) or
``error``, and the page's ``url`` and ``title`` after the action.

Commands: navigate(url), click(target), type(target, text), press(key), read_page(),
screenshot(name?), close(). A target is a CSS/Playwright selector or an element's visible
text, label, placeholder or name. Standard library plus Playwright; Python >= 3.10.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time

MARKER = "__AES_BROWSER_RESULT__"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CHROMIUMS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
SHOTS = "/logs/agent/screenshots"
IDLE_EXIT_SEC = 3 * 3600
ACTION_TIMEOUT_MS = 5_000
NAVIGATION_TIMEOUT_MS = 30_000
TEXT_LIMIT = 6_000

# The page as text for a model that cannot see it: visible text, then forms, fields, buttons, links.
VIEW_JS = r"""() => {
  const visible = el => { const r = el.getBoundingClientRect(), s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none'; };
  const unique = sel => { try { return document.querySelectorAll(sel).length === 1; } catch (e) { return false; } };
  const selector = el => {
    if (el.id && unique('#' + CSS.escape(el.id))) return '#' + CSS.escape(el.id);
    const tag = el.tagName.toLowerCase(), name = el.getAttribute('name');
    const href = el.getAttribute('href');
    if (tag === 'a' && href && unique(`a[href="${href}"]`)) return `a[href="${href}"]`;
    if (name) { let s = `${tag}[name="${name}"]`; if (el.type === 'radio') s += `[value="${el.value}"]`;
      if (unique(s)) return s; }
    const parts = []; let node = el;
    while (node && node.nodeType === 1 && node !== document.body) {
      if (node.id && unique('#' + CSS.escape(node.id))) { parts.unshift('#' + CSS.escape(node.id)); break; }
      const tag = node.tagName.toLowerCase(), same = [...(node.parentElement || document).children]
        .filter(s => s.tagName === node.tagName);
      parts.unshift(same.length > 1 ? `${tag}:nth-of-type(${same.indexOf(node) + 1})` : tag);
      node = node.parentElement;
    }
    return parts.join(' > ');
  };
  const label = el => { if (el.labels && el.labels.length) return el.labels[0].innerText.trim();
    return el.getAttribute('aria-label') || el.getAttribute('placeholder') || ''; };
  const clip = (t, n) => (t || '').replace(/\s+/g, ' ').trim().slice(0, n);
  const fields = [], buttons = [], links = [];
  for (const el of document.querySelectorAll('input, select, textarea')) {
    if (el.type === 'hidden' || !visible(el)) continue;
    const f = {selector: selector(el), tag: el.tagName.toLowerCase(), type: el.type || '', name: el.name || '',
               label: clip(label(el), 80), form: el.form ? selector(el.form) : ''};
    if (el.tagName === 'SELECT') f.options = [...el.options].map(o => (o.selected ? '[x] ' : '') + clip(o.text, 80));
    else if (el.type === 'checkbox' || el.type === 'radio') f.checked = el.checked;
    else if (!['submit', 'button', 'reset'].includes(el.type)) f.value = clip(el.value, 200);
    if (['submit', 'button', 'reset'].includes(el.type)) buttons.push({selector: f.selector, text: clip(el.value, 80)});
    else fields.push(f);
  }
  for (const el of document.querySelectorAll('button, [role=button]'))
    if (visible(el)) buttons.push({selector: selector(el), text: clip(el.innerText, 80)});
  for (const el of document.querySelectorAll('a[href]'))
    if (visible(el)) links.push({selector: selector(el), text: clip(el.innerText, 80), href: el.getAttribute('href')});
  return {text: document.body ? document.body.innerText : '', fields, buttons, links};
}"""


def state_dir() -> str:
    home = os.path.expanduser("~")
    for base in (os.path.join(home, ".cache", "aes-browser"), f"/tmp/aes-browser-{os.getuid()}"):
        try:
            os.makedirs(base, mode=0o700, exist_ok=True)
            if os.access(base, os.W_OK):
                return base
        except OSError:
            continue
    raise RuntimeError("no writable directory for the browser session (home or /tmp)")


# -- the client: one command per exec ----------------------------------------------------------------
def _send(sock_path: str, command: dict, timeout: float) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(sock_path)
        sock.sendall(json.dumps(command).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data or b'{"ok": false, "error": "the browser session closed the connection"}')


def _start_server(directory: str, source: str) -> None:
    script = os.path.join(directory, "session.py")
    with open(script, "w") as out:
        out.write(source)
    log = open(os.path.join(directory, "session.log"), "ab")
    env = {**os.environ, "TMPDIR": os.path.join(directory, "tmp")}
    os.makedirs(env["TMPDIR"], exist_ok=True)
    subprocess.Popen([sys.executable, script, "serve", directory], stdin=subprocess.DEVNULL, stdout=log,
                     stderr=log, env=env, start_new_session=True, close_fds=True)


def call(command: dict) -> dict:
    directory = state_dir()
    sock_path = os.path.join(directory, "sock")
    timeout = float(command.get("timeout") or 60)
    try:
        return _send(sock_path, command, timeout)
    except (FileNotFoundError, ConnectionRefusedError):
        pass
    source = sys.orig_argv[sys.orig_argv.index("-c") + 1] if "-c" in sys.orig_argv else open(__file__).read()
    failed = os.path.join(directory, "failed")
    if os.path.exists(failed):
        os.unlink(failed)
    _start_server(directory, source)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.3)
        if os.path.exists(failed):
            return {"ok": False, "error": "the browser did not start: " + open(failed, errors="replace").read()[-1500:]}
        try:
            result = _send(sock_path, command, timeout)
            result["started"] = True
            return result
        except (FileNotFoundError, ConnectionRefusedError):
            continue
    log = os.path.join(directory, "session.log")
    tail = open(log, errors="replace").read()[-1500:] if os.path.exists(log) else ""
    return {"ok": False, "error": "the browser session did not start within 60 s" + (f"; its log: {tail}" if tail else "")}


# -- the server: one browser, one page ----------------------------------------------------------------
def chromium() -> str:
    explicit = os.environ.get("CHROMIUM_PATH") or os.environ.get("AES_CHROMIUM")
    if explicit and os.access(explicit, os.X_OK):
        return explicit
    for name in CHROMIUMS:
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeError("no Chromium in this environment (looked for $CHROMIUM_PATH, " + ", ".join(CHROMIUMS) + ")")


class Session:
    def __init__(self, directory: str):
        from playwright.sync_api import sync_playwright

        self.directory = directory
        self.playwright = sync_playwright().start()
        self.browser = self.playwright.chromium.launch(executable_path=chromium(), headless=True, args=ARGS)
        self.context = self.browser.new_context(viewport={"width": 1280, "height": 900})
        self.context.set_default_timeout(ACTION_TIMEOUT_MS)
        self.context.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
        self.pages = [self.context.new_page()]
        self.context.on("page", lambda page: self.pages.append(page))
        self.shots = 0

    @property
    def page(self):
        self.pages = [p for p in self.pages if not p.is_closed()] or [self.context.new_page()]
        return self.pages[-1]

    def settle(self) -> None:
        """Let a navigation an action started finish (a click that submits a form)."""
        self.page.wait_for_timeout(200)
        try:
            self.page.wait_for_load_state("load", timeout=NAVIGATION_TIMEOUT_MS)
        except Exception:
            pass

    def locate(self, target: str):
        """The element ``target`` names: a selector, else visible text, label, placeholder or name."""
        page, tried = self.page, []
        target = str(target).strip()
        if not target:
            raise ValueError("an empty selector or text")
        candidates = [("selector", lambda: page.locator(target)),
                      ("button", lambda: page.get_by_role("button", name=target, exact=True)),
                      ("link", lambda: page.get_by_role("link", name=target, exact=True)),
                      ("label", lambda: page.get_by_label(target, exact=True)),
                      ("placeholder", lambda: page.get_by_placeholder(target, exact=True)),
                      ("name", lambda: page.locator(f'[name="{target}"]')),
                      ("text", lambda: page.get_by_text(target, exact=True)),
                      ("text", lambda: page.get_by_text(target))]
        for kind, make in candidates:
            try:
                found = make()
                count = found.count()
            except Exception as exc:  # not a valid selector: try it as text
                tried.append(f"{kind}: {str(exc).splitlines()[0][:120]}")
                continue
            visible = [i for i in range(count) if found.nth(i).is_visible()]
            if visible:
                return found.nth(visible[0]), kind, len(visible)
        raise LookupError(f"no visible element matches {target!r} (tried it as a CSS/Playwright selector, a button "
                          "or link name, a field label, placeholder or name, and visible text); call read_page to "
                          "see the page's fields, buttons and links with their selectors")

    # -- actions --------------------------------------------------------------------------------
    def navigate(self, url: str) -> str:
        url = str(url).strip()
        if not re.match(r"^[a-z][a-z0-9+.-]*:", url):
            current = self.page.url
            base = current if current.startswith("http") else "http://127.0.0.1/"
            from urllib.parse import urljoin
            url = urljoin(base, url) if current.startswith("http") or url.startswith("/") else "http://" + url
        response = self.page.goto(url, wait_until="load")
        status = f" (HTTP {response.status})" if response is not None else ""
        return f"navigated to {self.page.url}{status}\n\n" + self.view()

    def click(self, target: str) -> str:
        element, kind, count = self.locate(target)
        tag = element.evaluate("e => e.tagName.toLowerCase() + (e.type ? '[' + e.type + ']' : '')")
        element.click()
        self.settle()
        more = f" (first of {count} matches)" if count > 1 else ""
        return f"clicked {tag} matched by {kind}{more}\n\n" + self.view()

    def type(self, target: str, text: str) -> str:
        element, kind, _ = self.locate(target)
        tag, kind_of = element.evaluate("e => [e.tagName.toLowerCase(), (e.type || '').toLowerCase()]")
        text = "" if text is None else str(text)
        if tag == "select":
            options = element.evaluate("e => [...e.options].map(o => [o.value, o.text.trim()])")
            exact = [v for v, t in options if t == text or v == text]
            partial = [v for v, t in options if text.strip().lower() in t.lower()] if text.strip() else []
            chosen = (exact or partial or [None])[0]
            if chosen is None or (not exact and len(partial) > 1):
                why = "more than one option contains" if chosen else "the select has no option"
                raise ValueError(f"{why} {text!r}; its options: " + "; ".join(repr(t) for _, t in options))
            element.select_option(value=chosen)
            done = f"selected {dict(options)[chosen]!r}"
        elif kind_of in ("checkbox", "radio"):
            on = text.strip().lower() in ("1", "true", "yes", "on", "check", "checked", "x")
            element.set_checked(on)
            done = "checked it" if on else "unchecked it"
        else:
            element.fill(text)
            done = f"typed {len(text)} characters"
        return f"{done} in {tag}{'[' + kind_of + ']' if kind_of and tag == 'input' else ''} matched by {kind}"

    def press(self, key: str) -> str:
        self.page.keyboard.press(str(key).strip())
        self.settle()
        return f"pressed {key}\n\n" + self.view()

    def read_page(self) -> str:
        return self.view(full=True)

    def screenshot(self, name: str = "") -> str:
        directory = SHOTS
        try:
            os.makedirs(directory, exist_ok=True)
            if not os.access(directory, os.W_OK):
                raise PermissionError(directory)
        except OSError:
            directory = os.path.join(self.directory, "screenshots")
            os.makedirs(directory, exist_ok=True)
        if not self.shots:
            self.shots = len([f for f in os.listdir(directory) if f.startswith("step-")])
        self.shots += 1
        slug = re.sub(r"[^a-z0-9]+", "-", (name or self.page.title() or "page").lower()).strip("-")[:40] or "page"
        path = os.path.join(directory, f"step-{self.shots:02d}-{slug}.png")
        self.page.screenshot(path=path, full_page=True)
        return f"screenshot saved: {path}\n\n" + self.view()

    def view(self, full: bool = False) -> str:
        page = self.page
        data = page.evaluate(VIEW_JS)
        text = re.sub(r"\n\s*\n+", "\n", data["text"]).strip()
        limit = TEXT_LIMIT if full else TEXT_LIMIT // 2
        if len(text) > limit:
            text = text[:limit] + f"\n[... {len(text) - limit} more characters: call read_page]"
        lines = [f"URL: {page.url}", f"Title: {page.title()}", "", "Visible text:", text or "(none)"]
        if data["fields"]:
            lines += ["", "Fields (type into them by selector or label):"]
            for f in data["fields"]:
                state = (" options: " + " | ".join(f["options"])) if "options" in f else \
                    (f" checked={f['checked']}" if "checked" in f else f" value={f.get('value', '')!r}")
                lines.append(f"- {f['selector']}  {f['tag']}{'[' + f['type'] + ']' if f['tag'] == 'input' else ''}"
                             f"{' label=' + repr(f['label']) if f['label'] else ''}{state}")
        if data["buttons"]:
            lines += ["", "Buttons:"] + [f"- {b['selector']}  {b['text']!r}" for b in data["buttons"]]
        if data["links"]:
            shown = data["links"] if full else data["links"][:40]
            lines += ["", "Links:"] + [f"- {a['selector']}  {a['text']!r} -> {a['href']}" for a in shown]
            if len(shown) < len(data["links"]):
                lines.append(f"[... {len(data['links']) - len(shown)} more links: call read_page]")
        return "\n".join(lines)

    def run(self, command: dict) -> dict:
        action, args = command.get("action"), command.get("args") or {}
        handler = {"navigate": self.navigate, "click": self.click, "type": self.type, "press": self.press,
                   "read_page": self.read_page, "screenshot": self.screenshot}.get(action)
        if handler is None:
            return {"ok": False, "error": f"unknown browser action {action!r}"}
        try:
            result = {"ok": True, "text": handler(**args)}
        except TypeError as exc:
            result = {"ok": False, "error": f"bad arguments for {action}: {exc}"}
        except Exception as exc:  # Playwright's errors (timeouts, bad selectors, navigation) go back to the model
            message = str(exc).split("Call log:")[0].strip()
            result = {"ok": False, "error": f"{type(exc).__name__}: {message[:600]}"}
        try:
            result.update(url=self.page.url, title=self.page.title())
        except Exception:
            result.update(url=None, title=None)
        return result


def serve(directory: str) -> None:
    sock_path = os.path.join(directory, "sock")
    if os.path.exists(sock_path):
        os.unlink(sock_path)
    try:
        session = Session(directory)
    except Exception as exc:
        with open(os.path.join(directory, "failed"), "w") as out:
            out.write(f"{type(exc).__name__}: {exc}")
        raise
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(sock_path + ".new")
    os.chmod(sock_path + ".new", 0o600)
    os.rename(sock_path + ".new", sock_path)  # clients connect only once the browser is up
    server.listen(4)
    server.settimeout(IDLE_EXIT_SEC)
    try:
        while True:
            try:
                conn, _ = server.accept()
            except socket.timeout:
                break
            with conn:
                data = b""
                while not data.endswith(b"\n"):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                try:
                    command = json.loads(data)
                except ValueError:
                    conn.sendall(b'{"ok": false, "error": "not a JSON command"}\n')
                    continue
                if command.get("action") == "close":
                    conn.sendall(b'{"ok": true, "text": "browser closed"}\n')
                    break
                conn.sendall(json.dumps(session.run(command)).encode() + b"\n")
    finally:
        os.unlink(sock_path)
        session.browser.close()
        session.playwright.stop()


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "serve":
        serve(sys.argv[2])
    elif mode == "call":
        try:
            out = call(json.loads(base64.b64decode(sys.argv[2])))
        except Exception as exc:
            out = {"ok": False, "error": f"the browser client failed: {type(exc).__name__}: {exc}"}
        print(MARKER + " " + json.dumps(out), flush=True)
    else:
        sys.exit("usage: browser_session.py call BASE64_JSON | serve DIR")
