"""What the typed action sets (aes.agents.browser, aes.agents.desktop) share: the toolbox of one
attempt (host tools, the instruction's note, the action log and how it goes into the trajectory),
the tools built from a table of actions, and the signature a model is shown.

An action table maps an action to ``(description, JSON-schema properties, required names)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from aes.agents.terminal import HostTool
from aes.models import ToolSpec

Actions = dict[str, tuple[str, dict, list[str]]]


@dataclass
class ActionToolbox:
    """The actions of one attempt: host tools, the instruction's note, and the action log."""

    kind: ClassVar[str] = "actions"
    """The set's name: the key of its record in the trajectory's ``extra``."""
    shown: ClassVar[tuple[str, ...]] = ("action", "ok")
    """What of each call its observation's ``extra.<kind>`` gets."""

    tools: list[HostTool] = field(default_factory=list)
    calls: list[dict] = field(default_factory=list)
    help: str = ""
    names: dict[str, str] = field(default_factory=dict)
    """Offered tool name -> action."""

    def record(self, steps: list[dict] | None = None) -> dict:
        """What goes into the trajectory (``extra.<kind>``); each action's observation in ``steps``
        also gets the fields :attr:`shown` of its call."""
        if steps is not None:
            pending = list(self.calls)
            for step in steps:
                for res in (step.get("observation") or {}).get("results") or []:
                    extra = res.get("extra") or {}
                    if extra.get("tool") in self.names and pending and pending[0]["tool"] == extra["tool"]:
                        call = pending.pop(0)
                        extra[self.kind] = {k: call.get(k) for k in self.shown}
        return {"tools": dict(self.names), "actions": self.calls,
                "screenshots": [c["screenshot"] for c in self.calls if c.get("screenshot")]}


def signature(actions: Actions, name: str, action: str) -> str:
    """How a model calls ``action`` offered as ``name``: ``click(target)``, ``screenshot(name?)``."""
    _, props, required = actions[action]
    return f"{name}(" + ", ".join(k + ("" if k in required else "?") for k in props) + ")"


def offer(box: ActionToolbox, actions: Actions, reserved: set[str] | frozenset,
          runner: Callable[[str, str], Callable[[dict], Any]],
          parse: Callable[[str, str], dict[str, Any]]) -> None:
    """One host tool per action on ``box``: named as the action, or ``<kind>_<action>`` where that
    name is taken (the shell's tools, MCP tools); ``runner(name, action)`` runs it, ``parse(action,
    rest)`` reads a fenced one-line call."""
    taken = {"bash", "submit", *reserved}
    for action, (description, props, required) in actions.items():
        name = action if action not in taken else f"{box.kind}_{action}"
        taken.add(name)
        box.names[name] = action
        schema = {"type": "object", "properties": props, "required": required}
        box.tools.append(HostTool(ToolSpec(name=name, description=description, parameters=schema),
                                  runner(name, action), (lambda rest, action=action: parse(action, rest))))


def unquote(text: str) -> str:
    """``text`` without one pair of surrounding quotes."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text
