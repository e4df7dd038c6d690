"""Admission checks of tool-calling tasks (run after checks 1-4 and the reset check).

A tool-calling task declares its service's MCP server(s) (``[[environment.mcp_servers]]``), a
command that prints the service's whole state, and the records its instruction lets change::

    [metadata]
    state_dump_command = "python3 /srv/coldchain/dump.py"   # run as root; one JSON object
    allowed_changes = ["consignments/CN-4410", "shipments/SH-4410-*", "audit/*"]

The dump is ``{collection: {record id: record}}`` (a list counts as records 0, 1, ...); a record's
key is ``collection/id`` and ``allowed_changes`` are globs over those keys. Two fresh environments
are probed side by side:

* do nothing — dump, start every MCP server and list its tools (what each solver attempt does
  first), dump again: the servers must answer with tools, and the state must stay as seeded;
* the reference — dump, run ``solution/solve.sh``, dump again: it must change the state, and only
  records that ``allowed_changes`` names.

And the two fresh dumps must be equal (the service starts from the same seeded state every time).
A third environment runs the wrong-work probe (:mod:`aes.domains.tool_calling.probes`): the
reference through its MCP servers wrapped so that every record gets the first record's decision;
tests that give that blanket attempt 0.5 or more are rejected (``tool_calling.blanket_rewarded``).
Then the service's code, data and sudo rule (``[metadata] app_data``) must be out of the agent
user's reach (:mod:`aes.domains.agent_access`: ``tool_calling.no_app_data``,
``tool_calling.agent_can_write_app_data``, ``tool_calling.agent_is_root``, ...): the state changes
only through the tools.
"""

from __future__ import annotations

import fnmatch
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from aes.agents.mcp import McpClient
from aes.domains.agent_access import access_reasons
from aes.domains.tool_calling.probes import Blanket, blanket_reasons
from aes.sandbox import AgentRun, OracleAgent
from aes.tasks import Reason, load_task

DUMP_TIMEOUT_SEC = 120
_LIST = 8


def dump_state(container, command: str) -> dict | str:
    """The flattened state ``{"collection/id": canonical JSON}``, or why it could not be read."""
    run = container.exec(["sh", "-c", f"{{ {command}\n}} 2>/dev/null"], DUMP_TIMEOUT_SEC, user="0")
    if run.exit_code != 0:
        again = container.exec(["sh", "-c", command], DUMP_TIMEOUT_SEC, user="0")
        return f"exit {again.exit_code if again.exit_code is not None else 'none (timed out)'}: " \
               f"{again.output.strip()[-300:]}"
    try:
        return flatten(json.loads(run.output))
    except ValueError as exc:
        return f"{exc}; output: {run.output.strip()[:200]}"


def flatten(state) -> dict[str, str]:
    """``{collection: {id: record}}`` (or ``{collection: [record, ...]}``) as ``{"collection/id": json}``."""
    if not isinstance(state, dict) or not state:
        raise ValueError("the state dump must be a non-empty JSON object of collections")
    flat: dict[str, str] = {}
    for collection, records in state.items():
        if isinstance(records, dict):
            items = records.items()
        elif isinstance(records, list):
            items = enumerate(records)
        else:
            raise ValueError(f"collection {collection!r} must be an object or a list of records")
        for rid, record in items:
            flat[f"{collection}/{rid}"] = json.dumps(record, sort_keys=True)
    return flat


def changed_keys(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


class _IdleProbe:
    """Does nothing but start the task's MCP servers and list their tools, between two dumps."""

    name = "tool-calling-idle-probe"

    def __init__(self, command: str):
        self.command = command

    def run(self, task, container, timeout: float) -> AgentRun:
        info: dict = {"before": dump_state(container, self.command), "servers": []}
        for server in task.spec.mcp_servers:
            out = McpClient(container, server, user=task.spec.agent_user).list_tools(min(timeout, 120))
            reply = (out.get("results") or [{}])[0]
            tools = ((reply.get("result") or {}).get("tools") or []) if out.get("ok") else []
            error = out.get("error") or (json.dumps(reply["error"]) if "error" in reply else None)
            info["servers"].append({"name": server.name, "tools": len(tools), "error": error,
                                    "stderr": (out.get("stderr") or "")[-300:]})
        info["after"] = dump_state(container, self.command)
        return AgentRun(exit_code=0, info=info)


class _ReferenceProbe(OracleAgent):
    """The reference solution, between two dumps."""

    name = "tool-calling-reference-probe"

    def __init__(self, command: str):
        self.command = command

    def run(self, task, container, timeout: float) -> AgentRun:
        before = dump_state(container, self.command)
        run = super().run(task, container, timeout)
        run.info = {**run.info, "before": before, "after": dump_state(container, self.command)}
        return run


def _few(keys: list[str]) -> str:
    return ", ".join(keys[:_LIST]) + (f" (+{len(keys) - _LIST} more)" if len(keys) > _LIST else "")


def checks(task_dir: str | Path, runner, image: str) -> list[Reason]:
    """The tool-calling domain's reasons to reject the task at ``task_dir`` (built as ``image``)."""
    task = load_task(Path(task_dir))
    meta = task.spec.metadata or {}
    command, allowed = meta.get("state_dump_command"), meta.get("allowed_changes")
    reasons = []
    if not task.spec.mcp_servers:
        reasons.append(Reason("tool_calling.no_mcp_server", "task.toml declares no [[environment.mcp_servers]]: "
                                                            "the service's tools must be reachable over MCP"))
    if not isinstance(command, str) or not command.strip():
        reasons.append(Reason("tool_calling.no_state_dump", "task.toml needs [metadata] state_dump_command: a "
                                                            "command that prints the service's whole state as JSON"))
    if not isinstance(allowed, list) or not allowed or not all(isinstance(p, str) and p for p in allowed):
        reasons.append(Reason("tool_calling.no_allowed_changes", "task.toml needs [metadata] allowed_changes: globs "
                                                                 "of the collection/id records the task may change"))
    if reasons:
        return reasons

    with ThreadPoolExecutor(max_workers=3) as pool:
        idle_f = pool.submit(runner.run, task, _IdleProbe(command), image)
        ref_f = pool.submit(runner.run, task, _ReferenceProbe(command), image)
        blanket_f = pool.submit(runner.run, task, Blanket(), image)
        idle, ref = idle_f.result().agent_info, ref_f.result().agent_info
        blanket = blanket_f.result()
    reasons.extend(access_reasons("tool_calling", task_dir, runner, image))
    reasons.extend(blanket_reasons(blanket))

    for server in idle.get("servers", []):
        if server["error"]:
            detail = f"MCP server {server['name']!r} did not list its tools: {server['error']}"
            reasons.append(Reason("tool_calling.mcp_unavailable", detail + (f"; its stderr: {server['stderr']}"
                                                                            if server["stderr"] else "")))
        elif not server["tools"]:
            reasons.append(Reason("tool_calling.mcp_no_tools", f"MCP server {server['name']!r} offers no tools"))
    states = [("a fresh environment", idle.get("before")), ("after listing the tools", idle.get("after")),
              ("a second fresh environment", ref.get("before")), ("after the reference", ref.get("after"))]
    unreadable = [f"{where}: {state}" for where, state in states if not isinstance(state, dict)]
    if unreadable:
        reasons.append(Reason("tool_calling.state_unreadable", f"state_dump_command ({command}) gave no state "
                                                               f"({'; '.join(unreadable)[:600]})"))
        return reasons
    seeded, idle_after, fresh, done = (s for _, s in states)
    moved = changed_keys(seeded, idle_after)
    if moved:
        reasons.append(Reason("tool_calling.nop_changed_state",
                              f"doing nothing (only starting the MCP server and listing its tools) changed the "
                              f"service state: {_few(moved)}; the state must stay as seeded until a tool writes"))
    differs = changed_keys(seeded, fresh)
    if differs:
        reasons.append(Reason("tool_calling.reset_state_differs",
                              f"two fresh environments start with different service states ({_few(differs)}): "
                              "seed it deterministically (no clock, randomness or order dependence)"))
    changed = changed_keys(fresh, done)
    if not changed:
        reasons.append(Reason("tool_calling.reference_no_change",
                              "the reference solution left the service state unchanged: it must make the task's "
                              "changes through the service's tools"))
    outside = [k for k in changed if not any(fnmatch.fnmatchcase(k, p) for p in allowed)]
    if outside:
        reasons.append(Reason("tool_calling.reference_out_of_scope",
                              f"the reference solution changed records outside [metadata] allowed_changes "
                              f"({', '.join(allowed)}): {_few(outside)}"))
    return reasons
