"""MCP tools for the solver: the servers a task declares (``[[environment.mcp_servers]]``) become tools.

Transport. Every server is reached from inside the task's container, whatever its network: for
each batch of requests aes execs :mod:`aes.agents.mcp_bridge` (a standard-library script, sent
with the command) under the container's ``python3``, as the task's agent user. The bridge starts
a ``stdio`` server's command (or connects to an ``sse`` / ``streamable-http`` URL the container
can reach), runs the MCP handshake, makes the requests and prints the results. So a stdio server
lives for one batch: tools/list at the start of an attempt, then one process per tool call; a
task's service keeps its state in files (which is also what the sealed verifier receives).

Offer. :func:`attach` lists every server's tools and makes each a
:class:`~aes.agents.terminal.HostTool`: with native tool calls its name, description and input
schema go to the model as a tool; without, the instruction lists the tools and a fenced block
with one line ``TOOL {"arg": ...}`` (or ``TOOL value ...``, values in schema order) calls one.
A tool is offered under its own name, or ``<server>__<tool>`` when that name is taken (``bash``,
``submit``, another host tool or another server's tool). Results (text content; other content
summarised; ``isError`` marked) return as the tool's observation; every call, with its server,
arguments, error flag and time, is also recorded in the ATIF trajectory (``extra.mcp`` and the
observation's ``extra.mcp``).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aes.agents.terminal import HostTool
from aes.models import ToolSpec
from aes.tasks.mcp import McpServerSpec

log = logging.getLogger(__name__)

BRIDGE_SOURCE = Path(__file__).with_name("mcp_bridge.py").read_text()
MARKER = "__AES_MCP_RESULT__"
_HEREDOC = "__AES_MCP_BRIDGE_EOF__"
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
RESERVED = frozenset({"bash", "submit"})
DISCOVERY_TIMEOUT_SEC = 60.0
_PARSE_ERROR = "__aes_parse_error__"


def bridge_command(server: McpServerSpec, ops: list[dict], timeout: float) -> list[str]:
    """The exec argv that runs the bridge in the container for ``ops`` against ``server``."""
    config = {"server": server.to_dict(), "ops": ops, "timeout": timeout,
              "client": {"name": "aes", "version": "1"}}
    payload = base64.b64encode(json.dumps(config).encode()).decode()
    missing = json.dumps({"ok": False, "error": "the container has no python3 (the MCP bridge needs it)"})
    script = (f"PY=$(command -v python3 || command -v python) || {{ echo '{MARKER} {missing}'; exit 127; }}\n"
              f"\"$PY\" - {payload} <<'{_HEREDOC}'\n{BRIDGE_SOURCE}\n{_HEREDOC}\n")
    return ["sh", "-c", script]


def parse_bridge_output(output: str) -> dict:
    """The bridge's result object from the exec's (interleaved) output."""
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
    return {"ok": False, "error": "the MCP bridge printed no result" + (f": {tail}" if tail else "")}


class McpClient:
    """Requests to one server of a task, through the bridge, in one container."""

    def __init__(self, container, server: McpServerSpec, user: str | None = None):
        self.container, self.server, self.user = container, server, user

    def request(self, ops: list[dict], timeout: float) -> dict:
        # the bridge's own deadline comes first, so it reports (and cleans up) before exec gives up
        inner = max(timeout - 2.0, 1.0)
        result = self.container.exec(bridge_command(self.server, ops, inner), timeout, user=self.user)
        if result.timed_out:
            return {"ok": False, "error": f"no reply from MCP server {self.server.name!r} within {timeout:.0f} s"}
        return parse_bridge_output(result.output)

    def list_tools(self, timeout: float = DISCOVERY_TIMEOUT_SEC) -> dict:
        """The bridge's answer to tools/list (every page): ``ok``, ``results[0]`` and server info."""
        return self.request([{"method": "tools/list", "all_pages": True, "key": "tools"}], timeout)

    def call(self, name: str, arguments: dict[str, Any], timeout: float) -> dict:
        """tools/call: ``{"ok", "result" | "error", ...}``."""
        out = self.request([{"method": "tools/call", "params": {"name": name, "arguments": arguments}}], timeout)
        if out.get("ok") and out.get("results"):
            out.update(out["results"][0])
        return out


def render_result(result: dict) -> str:
    """A tools/call result as the observation the model reads."""
    parts = []
    for item in result.get("content") or []:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "text":
            parts.append(str(item.get("text", "")))
        elif kind == "resource":
            res = item.get("resource") or {}
            parts.append(res["text"] if isinstance(res.get("text"), str)
                         else f"[resource {res.get('uri')} ({res.get('mimeType') or 'binary'})]")
        elif kind == "resource_link":
            parts.append(f"[resource link {item.get('uri')}: {item.get('name') or ''}]")
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} content, {item.get('mimeType')}, {len(str(item.get('data') or ''))} base64 characters]")
        elif item is not None:
            parts.append(json.dumps(item))
    if not parts and result.get("structuredContent") is not None:
        parts.append(json.dumps(result["structuredContent"], indent=1))
    text = "\n".join(parts) if parts else "(the tool returned no content)"
    return ("[tool error]\n" + text) if result.get("isError") else text


def _properties(schema: dict) -> list[tuple[str, dict]]:
    props = schema.get("properties") if isinstance(schema, dict) else None
    return [(k, v if isinstance(v, dict) else {}) for k, v in (props or {}).items()]


def _coerce(value: str, prop: dict) -> Any:
    """A fenced argument word as the schema's type asks (strings stay strings)."""
    kinds = prop.get("type")
    if kinds == "string" or kinds == ["string"]:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def parse_fenced_args(rest: str, schema: dict) -> dict[str, Any]:
    """Arguments from the rest of a fenced tool line: a JSON object, ``key=value`` words, or
    values in the order of the schema's properties."""
    rest = rest.strip()
    if not rest:
        return {}
    if rest.startswith("{"):
        try:
            value = json.loads(rest)
        except ValueError as exc:
            return {_PARSE_ERROR: f"the arguments are not a JSON object: {exc}"}
        return value if isinstance(value, dict) else {_PARSE_ERROR: "the arguments must be a JSON object"}
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        return {_PARSE_ERROR: f"cannot split the arguments: {exc}"}
    props = dict(_properties(schema))
    if words and all(re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w) for w in words):
        pairs = [w.split("=", 1) for w in words]
        return {k: _coerce(v, props.get(k, {})) for k, v in pairs}
    order = list(props)
    if len(words) > len(order):
        if len(order) == 1:  # one parameter: the whole rest is its value
            return {order[0]: _coerce(rest, props[order[0]])}
        return {_PARSE_ERROR: f"{len(words)} values for {len(order)} parameter(s) ({', '.join(order) or 'none'})"}
    return {k: _coerce(w, props[k]) for k, w in zip(order, words)}


def _signature(name: str, schema: dict) -> str:
    required = set(schema.get("required") or []) if isinstance(schema, dict) else set()
    params = []
    for key, prop in _properties(schema):
        kind = prop.get("type") or ("enum" if "enum" in prop else "any")
        kind = "|".join(kind) if isinstance(kind, list) else kind
        if "enum" in prop:
            kind += " in " + "/".join(json.dumps(v) for v in prop["enum"])
        params.append(f"{key}: {kind}" + ("" if key in required else " (optional)"))
    return f"{name}({', '.join(params)})"


@dataclass
class McpTool:
    """One offered tool: the name the model sees and the server's own."""

    offered: str
    server: str
    name: str
    description: str
    schema: dict


@dataclass
class McpToolbox:
    """The MCP tools of one attempt: host tools, the instruction's note, and the call log."""

    tools: list[HostTool] = field(default_factory=list)
    offered: list[McpTool] = field(default_factory=list)
    servers: list[dict] = field(default_factory=list)
    calls: list[dict] = field(default_factory=list)
    help: str = ""

    def record(self, steps: list[dict] | None = None) -> dict:
        """What goes into the trajectory (``extra.mcp``); each call's observation in ``steps`` also
        gets its server, the server's tool name and the error flag (``extra.mcp``)."""
        if steps is not None:
            names = {t.offered for t in self.offered}
            pending = list(self.calls)
            for step in steps:
                for res in (step.get("observation") or {}).get("results") or []:
                    extra = res.get("extra") or {}
                    if extra.get("tool") in names and pending and pending[0]["tool"] == extra["tool"]:
                        call = pending.pop(0)
                        extra["mcp"] = {k: call[k] for k in ("server", "name", "is_error", "seconds")}
        return {"servers": self.servers, "tools": [{"tool": t.offered, "server": t.server, "name": t.name}
                                                     for t in self.offered],
                "calls": self.calls}


def _offered_name(server: str, name: str, taken: set[str]) -> str:
    if _NAME.match(name) and name not in taken:
        return name
    candidate = re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}__{name}")[:64]
    base, n = candidate, 2
    while candidate in taken:
        candidate = f"{base[:60]}_{n}"
        n += 1
    return candidate


def attach(task, container, *, fenced: bool, call_timeout: float, reserved: set[str] | frozenset = frozenset(),
           discovery_timeout: float = DISCOVERY_TIMEOUT_SEC) -> McpToolbox | None:
    """The MCP tools of ``task`` in ``container`` (None when the task declares no server)."""
    servers = list(getattr(getattr(task, "spec", None), "mcp_servers", None) or [])
    if not servers:
        return None
    box = McpToolbox()
    taken = set(RESERVED) | set(reserved)
    notes = []
    for server in servers:
        client = McpClient(container, server, user=task.spec.agent_user)
        started = time.monotonic()
        listing = client.list_tools(discovery_timeout)
        entry = {"name": server.name, "transport": server.transport, "ok": bool(listing.get("ok")),
                 "seconds": round(time.monotonic() - started, 3), "server_info": listing.get("server"),
                 "protocol": listing.get("protocol")}
        reply = (listing.get("results") or [{}])[0]
        if not listing.get("ok") or "error" in reply:
            entry["error"] = listing.get("error") or json.dumps(reply.get("error"))[:500]
            if listing.get("stderr"):
                entry["stderr"] = listing["stderr"][-500:]
            log.warning("%s: MCP server %r unavailable: %s", task.name, server.name, entry["error"])
            notes.append(f"(The MCP server `{server.name}` of this task could not be reached: {entry['error'][:200]})")
            box.servers.append(entry)
            continue
        tools = [t for t in (reply.get("result") or {}).get("tools") or [] if isinstance(t, dict) and t.get("name")]
        entry["tools"] = len(tools)
        box.servers.append(entry)
        offered_here = []
        for tool in tools:
            offered = _offered_name(server.name, str(tool["name"]), taken)
            taken.add(offered)
            schema = tool.get("inputSchema") if isinstance(tool.get("inputSchema"), dict) else {}
            schema = {"type": "object", "properties": {}, **schema}
            spec = McpTool(offered, server.name, str(tool["name"]), str(tool.get("description") or ""), schema)
            box.offered.append(spec)
            offered_here.append(spec)
            box.tools.append(HostTool(
                ToolSpec(name=offered, description=spec.description or f"MCP tool {spec.name} of {server.name}",
                         parameters=schema),
                _runner(box, client, spec, call_timeout),
                (lambda rest, schema=schema: parse_fenced_args(rest, schema)),
            ))
        notes.append(_server_note(server, offered_here, listing.get("instructions"), fenced))
    if box.offered and fenced:
        example = box.offered[0]
        notes.append(
            "To call a tool, reply with a fenced block holding one line: the tool's name and its arguments "
            "as a JSON object (or the values in the order listed), e.g.\n```bash\n"
            f"{example.offered} {json.dumps({k: '...' for k, _ in _properties(example.schema)[:2]})}\n```\n"
            "The result comes back as the tool's output. Shell commands still work as before.")
    box.help = "\n\n" + "\n\n".join(n for n in notes if n) if notes else ""
    return box


def _server_note(server: McpServerSpec, tools: list[McpTool], instructions: Any, fenced: bool) -> str:
    if not tools:
        return f"(The MCP server `{server.name}` of this task offers no tools.)"
    if fenced:
        lines = [f"This task's MCP server `{server.name}` offers these tools:"]
        for t in tools:
            desc = " ".join(t.description.split())
            lines.append(f"- {_signature(t.offered, t.schema)}" + (f": {desc}" if desc else ""))
    else:
        names = ", ".join(f"`{t.offered}`" for t in tools)
        lines = [f"This task's MCP server `{server.name}` is available: its tools ({names}) are offered to you "
                 "as tools besides `bash`; call them directly."]
    if isinstance(instructions, str) and instructions.strip():
        lines.append(f"Server notes: {instructions.strip()}")
    return "\n".join(lines)


def _runner(box: McpToolbox, client: McpClient, tool: McpTool, timeout: float):
    def run(arguments: dict[str, Any]) -> str:
        started = time.monotonic()
        record = {"tool": tool.offered, "server": tool.server, "name": tool.name, "arguments": arguments,
                  "is_error": True}
        if _PARSE_ERROR in arguments:
            text = f"[tool error]\n{arguments[_PARSE_ERROR]}. Call it as: {_signature(tool.offered, tool.schema)}"
            record.update(arguments={}, error=arguments[_PARSE_ERROR])
        else:
            out = client.call(tool.name, arguments, timeout)
            if not out.get("ok"):
                text = f"[tool error]\nthe MCP server `{tool.server}` failed: {out.get('error')}"
                record["error"] = out.get("error")
            elif "error" in out:
                err = out["error"] if isinstance(out["error"], dict) else {"message": str(out["error"])}
                text = f"[tool error]\n{err.get('message', '')} (JSON-RPC error {err.get('code')})"
                record["error"] = err
            else:
                result = out.get("result") or {}
                text = render_result(result)
                record["is_error"] = bool(result.get("isError"))
        record["seconds"] = round(time.monotonic() - started, 3)
        box.calls.append(record)
        return text
    return run
