"""``[[environment.mcp_servers]]`` of task.toml: the MCP servers a task offers its agent (Harbor's
``MCPServerConfig``: name, transport, url or command + args, headers).

aes reaches every server from inside the task's container (the container may have no network):
a ``stdio`` server is a command the container runs; an ``sse`` or ``streamable-http`` server is a
URL the container can reach (usually ``http://127.0.0.1:PORT/...``, a process the image's
ENTRYPOINT started). :mod:`aes.agents.mcp` forwards the agent's calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

TRANSPORTS = ("stdio", "sse", "streamable-http")
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")


@dataclass
class McpServerSpec:
    """One MCP server of a task (Harbor's defaults: transport ``sse``)."""

    name: str
    transport: str = "sse"
    url: str | None = None
    command: str | None = None
    args: list[str] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "transport": self.transport, "url": self.url, "command": self.command,
                "args": list(self.args), "headers": dict(self.headers)}


def parse_mcp_servers(env: dict[str, Any]) -> list[McpServerSpec]:
    """The servers of an ``[environment]`` table; raises TaskConfigError (task_toml.bad_value)."""
    from aes.tasks.config import TaskConfigError

    def bad(message: str) -> TaskConfigError:
        return TaskConfigError("task_toml.bad_value", f"[[environment.mcp_servers]] {message}")

    raw = env.get("mcp_servers") or []
    if not isinstance(raw, list):
        raise bad("must be an array of tables ([[environment.mcp_servers]])")
    servers: list[McpServerSpec] = []
    for entry in raw:
        if not isinstance(entry, dict):
            raise bad(f"entries must be tables, got {entry!r}")
        unknown = set(entry) - {"name", "transport", "url", "command", "args", "headers"}
        if unknown:
            raise bad(f"unknown key(s) {sorted(unknown)}")
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise bad("every server needs a name")
        transport = entry.get("transport", "sse")
        transport = "streamable-http" if transport == "http" else transport
        if transport not in TRANSPORTS:
            raise bad(f"{name}: transport must be one of {TRANSPORTS} (or 'http'), got {transport!r}")
        url, command = entry.get("url"), entry.get("command")
        args = entry.get("args", [])
        headers = entry.get("headers", {})
        if url is not None and not isinstance(url, str):
            raise bad(f"{name}: url must be a string")
        if command is not None and not isinstance(command, str):
            raise bad(f"{name}: command must be a string")
        if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
            raise bad(f"{name}: args must be an array of strings")
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise bad(f"{name}: headers must be a table of strings")
        if transport == "stdio":
            if not command:
                raise bad(f"{name}: 'command' is required for transport 'stdio'")
            if headers:
                raise bad(f"{name}: 'headers' is only supported for HTTP MCP transports")
        elif not url:
            raise bad(f"{name}: 'url' is required for transport {transport!r}")
        for key, value in headers.items():
            if not _HEADER_NAME.match(str(key)) or "\r" in value or "\n" in value:
                raise bad(f"{name}: bad header {key!r}")
        if any(s.name == name for s in servers):
            raise bad(f"two servers are named {name!r}")
        servers.append(McpServerSpec(name=name, transport=transport, url=url, command=command,
                                     args=[str(a) for a in args], headers={str(k): v for k, v in headers.items()}))
    return servers
