"""Typed actions an attempt gets beside its shell: the task's MCP tools and the action sets it asks for.

A *toolbox* offers host tools for one attempt in one container: ``tools`` (:class:`HostTool`), ``help``
(text appended to the instruction) and ``record(steps)`` (what goes into the trajectory's ``extra``
under the toolbox's name; it may also annotate the observation steps). Where they come from:

- ``mcp``: the MCP servers the task declares (``[[environment.mcp_servers]]``, aes/agents/mcp.py);
- an action set the task names in ``task.toml``'s ``[metadata] actions`` (e.g. ``["browser"]``):
  the module in :data:`ACTION_SETS` whose ``attach(task, container, *, fenced, call_timeout,
  reserved)`` returns a toolbox or None.

Tasks carry their own declaration, so a pool that mixes domains gives each attempt the tools its
task needs, and a task handed to Harbor keeps working from the shell alone.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from typing import Any, Protocol

from aes.agents.terminal import HostTool

log = logging.getLogger(__name__)

ACTION_SETS: dict[str, str] = {
    "browser": "aes.agents.browser",
    "desktop": "aes.agents.desktop",
}
"""Action set name -> module with ``attach(task, container, *, fenced, call_timeout, reserved)``."""


class Toolbox(Protocol):
    tools: list[HostTool]
    help: str

    def record(self, steps: list[dict] | None = None) -> dict: ...


def declared_actions(task: Any) -> list[str]:
    """The action sets ``task`` names in ``[metadata] actions`` (a name or a list of names)."""
    value = (getattr(getattr(task, "spec", None), "metadata", None) or {}).get("actions") or []
    names = [value] if isinstance(value, str) else [str(v) for v in value if isinstance(v, (str, int))]
    unknown = [n for n in names if n not in ACTION_SETS]
    if unknown:
        log.warning("%s: unknown action set(s) %s in [metadata] actions (known: %s); the agent has its shell only "
                    "for those", getattr(task, "name", "?"), unknown, ", ".join(ACTION_SETS))
    missing = [n for n in names if n in ACTION_SETS and importlib.util.find_spec(ACTION_SETS[n]) is None]
    if missing:
        log.warning("%s: action set(s) %s are not in this installation of aes (no module %s); the agent has its "
                    "shell only for those", getattr(task, "name", "?"), missing,
                    ", ".join(ACTION_SETS[n] for n in missing))
    return [n for n in names if n in ACTION_SETS and n not in missing]


def attach_all(task: Any, container: Any, *, fenced: bool, call_timeout: float,
               reserved: set[str]) -> dict[str, Toolbox]:
    """Every toolbox ``task`` gets in ``container``, by name (``mcp`` and the declared action sets)."""
    from aes.agents import mcp

    boxes: dict[str, Toolbox] = {}
    taken = set(reserved)
    found = mcp.attach(task, container, fenced=fenced, call_timeout=call_timeout, reserved=taken)
    if found is not None:
        boxes["mcp"] = found
        taken |= {t.spec.name for t in found.tools}
    for name in declared_actions(task):
        module = importlib.import_module(ACTION_SETS[name])
        box = module.attach(task, container, fenced=fenced, call_timeout=call_timeout, reserved=taken)
        if box is not None:
            boxes[name] = box
            taken |= {t.spec.name for t in box.tools}
    return boxes
