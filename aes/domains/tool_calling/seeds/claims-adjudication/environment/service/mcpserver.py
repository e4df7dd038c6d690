"""A minimal MCP server over stdio (newline-delimited JSON-RPC 2.0), standard library only.

    from mcpserver import Server, ToolError
    server = Server("coldchain", instructions="...")

    @server.tool("Look up one consignment.", {"consignment_id": {"type": "string"}}, required=["consignment_id"])
    def get_consignment(consignment_id):
        ...                      # return a dict / list / str; raise ToolError("...") for a tool error

    server.serve()               # reads requests from stdin until EOF

Arguments are checked against the declared properties (required, unknown, basic JSON types) before
the function runs; a bad call is a tool error (``isError: true``), as MCP asks. Dict and list
results are returned as JSON text (and dicts also as ``structuredContent``).
"""

import json
import sys

PROTOCOLS = ("2025-06-18", "2025-03-26", "2024-11-05")
_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list, "object": dict}


class ToolError(Exception):
    """Raised by a tool: the call fails with this message (a tool error, not a protocol error)."""


class Server:
    def __init__(self, name, version="1.0", instructions=None):
        self.name, self.version, self.instructions = name, version, instructions
        self.tools = {}

    def tool(self, description, properties=None, required=()):
        """Register the decorated function as a tool named after it."""
        def register(fn):
            schema = {"type": "object", "properties": dict(properties or {}), "required": list(required),
                      "additionalProperties": False}
            self.tools[fn.__name__] = (fn, {"name": fn.__name__, "description": description, "inputSchema": schema})
            return fn
        return register

    # -- protocol ------------------------------------------------------------------------------
    def handle(self, message):
        """The reply to one JSON-RPC message (None for notifications)."""
        method, mid = message.get("method"), message.get("id")
        if method is None or mid is None:
            return None
        params = message.get("params") or {}
        if method == "initialize":
            asked = params.get("protocolVersion")
            result = {"protocolVersion": asked if asked in PROTOCOLS else PROTOCOLS[0],
                      "capabilities": {"tools": {"listChanged": False}},
                      "serverInfo": {"name": self.name, "version": self.version}}
            if self.instructions:
                result["instructions"] = self.instructions
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = {"tools": [spec for _, spec in self.tools.values()]}
        elif method == "tools/call":
            result = self.call(params.get("name"), params.get("arguments") or {})
            if result is None:
                return {"jsonrpc": "2.0", "id": mid,
                        "error": {"code": -32602, "message": "unknown tool: %s" % params.get("name")}}
        else:
            return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "method not found: %s" % method}}
        return {"jsonrpc": "2.0", "id": mid, "result": result}

    def call(self, name, arguments):
        if name not in self.tools:
            return None
        fn, spec = self.tools[name]
        schema = spec["inputSchema"]
        problem = _check(arguments, schema)
        if problem:
            return _error("invalid arguments for %s: %s" % (name, problem))
        try:
            value = fn(**arguments)
        except ToolError as exc:
            return _error(str(exc))
        if isinstance(value, str):
            return {"content": [{"type": "text", "text": value}], "isError": False}
        result = {"content": [{"type": "text", "text": json.dumps(value, sort_keys=True)}], "isError": False}
        if isinstance(value, dict):
            result["structuredContent"] = value
        return result

    def serve(self, stdin=None, stdout=None):
        stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
        for line in stdin:
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError:
                reply = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
            else:
                reply = self.handle(message) if isinstance(message, dict) else None
            if reply is not None:
                stdout.write(json.dumps(reply) + "\n")
                stdout.flush()


def _error(text):
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _check(arguments, schema):
    if not isinstance(arguments, dict):
        return "arguments must be an object"
    props = schema.get("properties", {})
    for key in schema.get("required", []):
        if key not in arguments:
            return "missing required argument %r" % key
    for key, value in arguments.items():
        if key not in props:
            return "unknown argument %r (expected: %s)" % (key, ", ".join(sorted(props)) or "none")
        kind = props[key].get("type")
        want = _TYPES.get(kind)
        if want is not None and (not isinstance(value, want) or (kind != "boolean" and isinstance(value, bool))):
            return "argument %r must be of type %s" % (key, kind)
        if "enum" in props[key] and value not in props[key]["enum"]:
            return "argument %r must be one of %s" % (key, ", ".join(json.dumps(v) for v in props[key]["enum"]))
    return None
