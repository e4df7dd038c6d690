"""The desktop action set: typed GUI actions for tasks that name ``actions = ["desktop"]``.

Offer. :func:`attach` gives the solver eight host tools beside its shell: ``screenshot(name?)``,
``text_view()``, ``click(x, y, button?)``, ``double_click(x, y)``, ``move(x, y)``,
``drag(x, y, to_x, to_y)``, ``type(text)`` and ``key(combo)``. Coordinates are screen pixels of
the task's X display (``:0``, 1280x800 in the seeds). The solver models here read text only, so
``screenshot`` saves the PNG on disk (``/logs/agent/screenshots/step-NN-<name>.png``, kept with the
trial's logs) and answers with its path and the *text view* of the screen; ``text_view`` gives the
text view alone. The text view is what a person would see, in words: the screen size, the focused
window's title, the visible windows with their positions, the mouse position, and the text on the
screen read by OCR (tesseract) with each line's box and each word's centre, where to click it. It
never reads the document's file: the task is about the GUI, and the file is the answer's place.
With native tool calls the schemas go to the model; for fenced (text-only) models the instruction
lists the actions and a one-line fenced block calls one (``click 640 400``, ``key ctrl+s``,
``type "Status: Approved"``, or a JSON object of arguments).

Transport. Nothing runs on the host and nothing needs a network: every action is one
``container.exec`` of the desktop kit's commands (xdotool, ``desktop-settle``, ``desktop-shot``, ``desktop-text``;
aes/domains/desktop/base/desktop/) with ``DISPLAY`` set, as the task's agent user. The first action
waits until the desktop is ready (``desktop-wait``: the document's window mapped and focused). The
solver's own shell can run the same commands (``xdotool key ctrl+s``) at any time.

Record. Every action is a tool call of the ATIF trajectory; :meth:`DesktopToolbox.record` lists
them (action, arguments, ok or error, the focused window after it, seconds, screenshot path) under
``extra.desktop`` and marks each observation's ``extra.desktop``. A failed action (an unknown key
name, a point off the screen) returns ``[desktop error] ...`` to the model and the episode goes on.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from typing import Any

from aes.agents.actionset import ActionToolbox, offer, signature, unquote

DISPLAY = ":0"
WAIT_SEC = 240
_PARSE_ERROR = "__aes_parse_error__"
_INT = {"type": "integer", "description": "Screen pixels from the left (x) or the top (y)."}
_BUTTONS = {"left": 1, "middle": 2, "right": 3}

ACTIONS: dict[str, tuple[str, dict, list[str]]] = {
    "screenshot": ("Save a screenshot of the whole screen (a PNG on disk under /logs/agent/screenshots/, which you "
                   "cannot see here); returns its path and the text view of the screen.",
                   {"name": {"type": "string", "description": "A short name for the file (optional)."}}, []),
    "text_view": ("The screen as text: focused window, windows, mouse position, and the text on the screen (OCR) "
                  "with each line's box and each word's centre (word@x,y: where to click it).", {}, []),
    "click": ("Move the mouse to (x, y) and click (button left, middle or right; default left).",
              {"x": _INT, "y": _INT, "button": {"type": "string", "enum": list(_BUTTONS)}}, ["x", "y"]),
    "double_click": ("Move the mouse to (x, y) and double-click with the left button (selects a word).",
                     {"x": _INT, "y": _INT}, ["x", "y"]),
    "move": ("Move the mouse to (x, y) without clicking.", {"x": _INT, "y": _INT}, ["x", "y"]),
    "drag": ("Press the left button at (x, y), move to (to_x, to_y) and release (selects a range).",
             {"x": _INT, "y": _INT, "to_x": _INT, "to_y": _INT}, ["x", "y", "to_x", "to_y"]),
    "type": ("Type text at the keyboard focus, as if on the keyboard (a newline presses Return).",
             {"text": {"type": "string", "description": "The text to type."}}, ["text"]),
    "key": ("Press a key or a key combination, e.g. Return, Tab, Escape, Down, Home, shift+End, ctrl+b, ctrl+s; "
            "several separated by spaces are pressed one after another (e.g. 'ctrl+Home Down Down').",
            {"combo": {"type": "string", "description": "X key names joined by +, e.g. ctrl+shift+Left"}}, ["combo"]),
}

_WAIT = f"desktop-wait {WAIT_SEC} >&2 || exit 3"
# after an input: until the screen has stopped changing (the kit's desktop-settle); a task built on an
# older copy of the kit, without it, gets the half second it always had
_SETTLE = "if command -v desktop-settle >/dev/null; then desktop-settle 10 >&2 || true; else sleep 0.5; fi"
_FOCUS = "printf '\\n__focus__ %s\\n' \"$(xdotool getactivewindow getwindowname 2>/dev/null)\""


def _geometry_guard(*points: tuple[int, int]) -> str:
    checks = " || ".join(f"[ {x} -ge $W ] || [ {y} -ge $H ]" for x, y in points)
    return ("read W H <<EOF\n$(xdotool getdisplaygeometry)\nEOF\n"
            f"if {checks}; then echo \"the point is off the screen ($W x $H)\" >&2; exit 4; fi")


def action_script(action: str, args: dict[str, Any]) -> str:
    """The shell script that performs one action in the container (as the agent user, DISPLAY set)."""
    q = shlex.quote
    if action in ("click", "double_click", "move", "drag"):
        pts = [(int(args["x"]), int(args["y"]))] + ([(int(args["to_x"]), int(args["to_y"]))] if action == "drag" else [])
        if any(v < 0 for p in pts for v in p):
            raise ValueError("coordinates must be 0 or more")
        (x, y) = pts[0]
        body = {"click": f"xdotool mousemove --sync {x} {y} click {_BUTTONS[args.get('button') or 'left']}",
                "double_click": f"xdotool mousemove --sync {x} {y} click --repeat 2 --delay 120 1",
                "move": f"xdotool mousemove --sync {x} {y}",
                "drag": (f"xdotool mousemove --sync {x} {y} mousedown 1 sleep 0.2 mousemove --sync {pts[-1][0]} "
                         f"{pts[-1][1]} sleep 0.2 mouseup 1")}[action]
        return "\n".join([_WAIT, _geometry_guard(*pts), body + " || exit 5", _SETTLE, _FOCUS])
    if action == "type":
        return "\n".join([_WAIT, f"xdotool type --clearmodifiers --delay 30 -- {q(str(args['text']))} || exit 5",
                          _SETTLE, _FOCUS])
    if action == "key":
        combos = str(args["combo"]).split()
        if not combos:
            raise ValueError("no key given")
        # xdotool only warns about a key name it does not know and presses nothing: stop on its warning
        return "\n".join([_WAIT, f"out=$(xdotool key --clearmodifiers --delay 100 {' '.join(q(c) for c in combos)} "
                                 "2>&1); rc=$?",
                          'case "$out" in *"No such key"*|*"nvalid"*) echo "$out" >&2; exit 6;; esac',
                          '[ "$rc" = 0 ] || { echo "$out" >&2; exit 5; }', _SETTLE, _FOCUS])
    if action == "screenshot":
        return "\n".join([_WAIT, f"path=$(desktop-shot {q(str(args.get('name') or 'screen'))}) || exit 5",
                          'echo "__shot__ $path"', 'desktop-text --words "$path"'])
    if action == "text_view":
        return "\n".join([_WAIT, "desktop-text --words"])
    raise ValueError(f"unknown action {action}")


def parse_fenced(action: str, rest: str) -> dict[str, Any]:
    """Arguments from the rest of a fenced line: a JSON object; numbers for the pointer actions
    (``click 640 400 right``); the whole rest for ``type`` and ``key`` (quotes around it dropped)."""
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
    if action in ("type", "key", "screenshot"):
        return {params[0]: unquote(rest)}
    words = rest.replace(",", " ").split()
    out: dict[str, Any] = {}
    for name, word in zip(params, words):
        if name == "button":
            out[name] = word
            continue
        try:
            out[name] = int(float(word))
        except ValueError:
            return {_PARSE_ERROR: f"{name} must be a number, not {word!r}"}
    return out


class DesktopToolbox(ActionToolbox):
    """The desktop actions of one attempt: host tools, the instruction's note, and the action log."""

    kind = "desktop"
    shown = ('action', 'ok', 'focused', 'screenshot')


def attach(task, container, *, fenced: bool, call_timeout: float, reserved: set[str] | frozenset = frozenset()
           ) -> DesktopToolbox:
    """The desktop actions for ``task`` in ``container``."""
    box = DesktopToolbox()
    offer(box, ACTIONS, reserved,
          lambda name, action: _runner(box, container, task.spec.agent_user, name, action, call_timeout), parse_fenced)
    doc = (getattr(task.spec, "metadata", None) or {}).get("document")
    lines = [f"This task has a graphical desktop (X display {DISPLAY}) with LibreOffice open"
             + (f" on {doc}" if doc else "") + ". You drive it with desktop actions: the mouse, the keyboard, and "
             "screenshots. You cannot see images: a screenshot is saved on disk and you get the text view of the "
             "screen instead (window titles, and the text on the screen by OCR with each word's centre, where to "
             "click it). The keyboard is often the surest way: LibreOffice's shortcuts (ctrl+s saves, ctrl+b bold, "
             "ctrl+e centre, ctrl+Home the start) and arrow keys move as they would for a person.",
             "Actions: " + ", ".join(signature(ACTIONS, n, a) for n, a in box.names.items()) + "."]
    for name, action in box.names.items():
        lines.append(f"- {signature(ACTIONS, name, action)}: {ACTIONS[action][0]}")
    if fenced:
        lines.append("To run an action, reply with a fenced block holding one line: the action's name and its "
                     "arguments, e.g.\n```bash\ntext_view\n```\n```bash\nclick 640 400\n```\n```bash\nkey ctrl+s\n```"
                     "\n```bash\ntype Status: Approved\n```\n(or the arguments as a JSON object: "
                     '`drag {"x": 100, "y": 200, "to_x": 300, "to_y": 200}`). Shell commands still work as before '
                     f"(DISPLAY={DISPLAY} xdotool ... drives the same desktop).")
    else:
        lines.append("They are offered to you as tools besides `bash`.")
    box.help = "\n\n" + "\n".join(lines)
    return box


def _check(action: str, arguments: dict[str, Any]) -> str | None:
    props, required = ACTIONS[action][1], ACTIONS[action][2]
    unknown = sorted(set(arguments) - set(props))
    missing = [k for k in required if k not in arguments]
    if unknown or missing:
        return f"{'unknown' if unknown else 'missing'} argument(s) {', '.join(unknown or missing)}"
    for key, value in arguments.items():
        if props[key].get("type") == "integer" and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return f"{key} must be a number"
    if arguments.get("button") not in (None, *_BUTTONS):
        return f"button must be one of {', '.join(_BUTTONS)}"
    return None


_ERRORS = {3: "the desktop is not ready", 4: "", 5: "the action failed", 6: "unknown key name"}


def _runner(box: DesktopToolbox, container, user: str | None, name: str, action: str, timeout: float):
    def run(arguments: dict[str, Any]) -> str:
        started = time.monotonic()
        record: dict[str, Any] = {"tool": name, "action": action, "arguments": arguments, "ok": False}
        error, text = None, ""
        if _PARSE_ERROR in arguments:
            error, record["arguments"] = arguments[_PARSE_ERROR], {}
        else:
            error = _check(action, arguments)
        if error is None:
            try:
                script = action_script(action, arguments)
            except (ValueError, TypeError, KeyError) as exc:
                error = str(exc)
        if error is not None:
            error = f"{error}; call it as: {signature(ACTIONS, name, action)}"
        else:
            result = container.exec(["bash", "-c", script], timeout, env={"DISPLAY": DISPLAY}, user=user)
            output = result.output or ""
            focus = re.findall(r"^__focus__ (.*)$", output, re.M)
            shot = re.search(r"^__shot__ (\S+)$", output, re.M)
            text = re.sub(r"^__(focus|shot)__ .*\n?", "", output, flags=re.M).strip()
            if focus:
                record["focused"] = focus[-1]
            if shot:
                record["screenshot"] = shot.group(1)
            if result.timed_out:
                error = f"no answer from the desktop within {timeout:.0f} s"
            elif result.exit_code != 0:
                error = ": ".join(p for p in (_ERRORS.get(result.exit_code, "the action failed"), text[-800:]) if p)
                if result.exit_code == 6:
                    error += (" (use X key names such as Return, Tab, Escape, BackSpace, Delete, Home, End, Up, "
                              "Down, Left, Right, Page_Down, F2, and ctrl/shift/alt+ for combinations)")
        record.update(ok=error is None, seconds=round(time.monotonic() - started, 3))
        if error is not None:
            record["error"] = error[:1000]
        box.calls.append(record)
        if error is not None:
            where = f"\n(the focused window is {record['focused']!r})" if record.get("focused") else ""
            return f"[desktop error] {error}{where}"
        if action == "screenshot":
            return (f"screenshot saved: {record.get('screenshot')} (a PNG on disk; you get its text view)\n\n{text}")
        if action == "text_view":
            return text or "(the text view is empty)"
        return f"done: {action}. Focused window: {record.get('focused') or '(none)'!r}"
    return run
