"""The browser action set: typed browser actions for tasks that name ``actions = ["browser"]``.

Offer. :func:`attach` gives the solver six host tools beside its shell: ``navigate(url)``,
``click(target)``, ``type(target, text)``, ``press(key)``, ``read_page()`` and
``screenshot(name?)``. A *target* is a CSS or Playwright selector, or an element's visible text,
button or link name, field label, placeholder or ``name``. Each action returns text a
text-only model can work from (the page's URL, title, visible text, and its fields, buttons
and links with selectors); with native tool calls the schemas go to the model, without them
the instruction lists the tools and a one-line fenced block calls one (``click Save draft``,
``type #note "some text"``, or a JSON object of arguments).

Transport. Nothing runs on the host and nothing needs a network: every action is one
``container.exec`` of ``aes/domains/browser/kit/browser_session.py`` (sent with the command)
under the container's ``python3``, as the task's agent user. Its first call starts a session
server in the container that keeps one headless Chromium page open (Playwright's Python API
pointed at the image's Chromium); later calls reach it through a unix socket in the user's
``~/.cache``. So the page, its cookies and its history live across actions, exactly as they
would for a person, and the solver's own shell can drive the same application (curl,
a Playwright script) at any time. Screenshots go to ``/logs/agent/screenshots/``
(``step-NN-<name>.png``), which the trial runner keeps with the trial's logs.

Record. Every action is a tool call of the ATIF trajectory; :meth:`BrowserToolbox.record`
lists them (action, arguments, ok or error, the URL and title after it, seconds, screenshot
path) under ``extra.browser`` and marks each observation's ``extra.browser``. A failed action
(a selector that matches nothing, a navigation error) returns ``[browser error] ...`` to the
model and the episode goes on.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
from pathlib import Path
from typing import Any

from aes.agents.actionset import ActionToolbox, offer, signature, unquote

log = logging.getLogger(__name__)

SESSION_SOURCE = (Path(__file__).resolve().parents[1] / "domains" / "browser" / "kit" / "browser_session.py").read_text()
MARKER = "__AES_BROWSER_RESULT__"
_PARSE_ERROR = "__aes_parse_error__"
_TARGET = {"type": "string", "description": "A CSS or Playwright selector (from read_page), or the element's visible "
                                            "text, button or link name, field label, placeholder or name."}

ACTIONS: dict[str, tuple[str, dict, list[str]]] = {
    "navigate": ("Open a URL in the browser (relative URLs resolve against the current page); returns the page as text.",
                 {"url": {"type": "string", "description": "e.g. http://127.0.0.1:8080/ or /cases"}}, ["url"]),
    "click": ("Click an element (link, button, checkbox, ...); waits for any page load; returns the page as text.",
              {"target": _TARGET}, ["target"]),
    "type": ("Put text in a field: replaces an input's or textarea's content, picks a select's option by its label "
             "or value, checks (yes/true/on) or unchecks (no/false/off) a checkbox. Does not submit.",
             {"target": _TARGET, "text": {"type": "string", "description": "The text, option or yes/no."}},
             ["target", "text"]),
    "press": ("Press a key on the focused element, e.g. Enter (submits a form), Tab, Escape, Control+A; returns "
              "the page as text.", {"key": {"type": "string", "description": "A key name, e.g. Enter"}}, ["key"]),
    "read_page": ("The current page as text: URL, title, visible text, form fields with their values and options, "
                  "buttons and links, each with a selector to use in click/type.", {}, []),
    "screenshot": ("Save a screenshot of the page (a PNG under /logs/agent/screenshots/); returns its path and the "
                   "page as text.", {"name": {"type": "string", "description": "A short name for the file (optional)."}},
                   []),
}


def session_command(action: str, arguments: dict[str, Any], timeout: float) -> list[str]:
    """The exec argv that runs one browser action in the container."""
    payload = base64.b64encode(json.dumps({"action": action, "args": arguments, "timeout": timeout}).encode()).decode()
    return ["python3", "-c", SESSION_SOURCE, "call", payload]


def parse_session_output(output: str) -> dict:
    """The session's result object from the exec's output (the last marker line)."""
    for line in reversed(output.splitlines()):
        if line.startswith(MARKER):
            try:
                value = json.loads(line[len(MARKER):])
            except ValueError:
                break
            if isinstance(value, dict):
                return value
            break
    tail = output.strip()[-500:]
    return {"ok": False, "error": "the browser session printed no result" + (f": {tail}" if tail else "")}


def parse_fenced(action: str, rest: str) -> dict[str, Any]:
    """Arguments from the rest of a fenced line: a JSON object; for ``type`` a target then the text;
    for the other actions the whole rest (quotes around it dropped)."""
    rest = rest.strip()
    params = list(ACTIONS[action][1])
    if rest.startswith("{"):
        try:
            value = json.loads(rest)
        except ValueError as exc:
            return {_PARSE_ERROR: f"the arguments are not a JSON object: {exc}"}
        return value if isinstance(value, dict) else {_PARSE_ERROR: "the arguments must be a JSON object"}
    if not params or not rest:
        return {}
    if action != "type":
        return {params[0]: unquote(rest)}
    match = re.match(r"""("(?:[^"\\]|\\.)*"|'[^']*'|\S+)\s*(.*)$""", rest, re.DOTALL)
    target, text = unquote(match.group(1)), match.group(2)
    return {"target": target, "text": unquote(text.strip())}


class BrowserToolbox(ActionToolbox):
    """The browser actions of one attempt: host tools, the instruction's note, and the action log."""

    kind = "browser"
    shown = ('action', 'ok', 'url', 'screenshot')


def attach(task, container, *, fenced: bool, call_timeout: float, reserved: set[str] | frozenset = frozenset()
           ) -> BrowserToolbox:
    """The browser actions for ``task`` in ``container`` (the session starts on the first action)."""
    box = BrowserToolbox()
    offer(box, ACTIONS, reserved,
          lambda name, action: _runner(box, container, task.spec.agent_user, name, action, call_timeout), parse_fenced)
    url = (getattr(task.spec, "metadata", None) or {}).get("app_url")
    lines = ["This task has a headless web browser (Chromium) that you drive with browser actions; it keeps its page, "
             "cookies and history between actions." + (f" The application is at {url}." if url else ""),
             "Actions: " + ", ".join(signature(ACTIONS, n, a) for n, a in box.names.items()) + "."]
    for name, action in box.names.items():
        lines.append(f"- {signature(ACTIONS, name, action)}: {ACTIONS[action][0]}")
    if fenced:
        lines.append("To run an action, reply with a fenced block holding one line: the action's name and its "
                     "arguments, e.g.\n```bash\nnavigate http://127.0.0.1:8080/\n```\n```bash\ntype #username alice\n```"
                     "\n```bash\nclick Sign in\n```\n(or the arguments as a JSON object: "
                     '`type {"target": "#note", "text": "two words"}`). Shell commands still work as before.')
    else:
        lines.append("They are offered to you as tools besides `bash`.")
    box.help = "\n\n" + "\n".join(lines)
    return box


def _runner(box: BrowserToolbox, container, user: str | None, name: str, action: str, timeout: float):
    def run(arguments: dict[str, Any]) -> str:
        started = time.monotonic()
        record: dict[str, Any] = {"tool": name, "action": action, "arguments": arguments, "ok": False}
        if _PARSE_ERROR in arguments:
            error = f"{arguments[_PARSE_ERROR]}. Call it as: {signature(ACTIONS, name, action)}"
            record["arguments"] = {}
            out = {"ok": False, "error": error}
        else:
            unknown = sorted(set(arguments) - set(ACTIONS[action][1]))
            missing = [k for k in ACTIONS[action][2] if k not in arguments]
            if unknown or missing:
                out = {"ok": False, "error": f"{'unknown' if unknown else 'missing'} argument(s) "
                                             f"{', '.join(unknown or missing)}; call it as: {signature(ACTIONS, name, action)}"}
            else:
                result = container.exec(session_command(action, arguments, max(timeout - 5.0, 5.0)), timeout,
                                        user=user)
                out = ({"ok": False, "error": f"no answer from the browser within {timeout:.0f} s"}
                       if result.timed_out else parse_session_output(result.output))
        record.update(ok=bool(out.get("ok")), url=out.get("url"), title=out.get("title"),
                      seconds=round(time.monotonic() - started, 3))
        if not out.get("ok"):
            record["error"] = str(out.get("error"))[:1000]
        shot = re.match(r"screenshot saved: (\S+)", out.get("text") or "")
        if shot:
            record["screenshot"] = shot.group(1)
        box.calls.append(record)
        if out.get("ok"):
            return str(out.get("text") or "done")
        where = f"\n(the page is still {out['url']})" if out.get("url") else ""
        return f"[browser error] {out.get('error')}{where}"
    return run
