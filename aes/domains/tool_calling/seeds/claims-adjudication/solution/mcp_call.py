"""A minimal MCP client for scripts (standard library only): start a stdio server, call its tools.

    from mcp_call import Session, ToolCallError
    with Session(["sudo", "-n", "/usr/local/bin/coldchain-mcp"]) as mcp:
        tools = mcp.list_tools()                     # [{"name", "description", "inputSchema"}, ...]
        policy = mcp.call("get_policy")              # the result: parsed JSON, else the text
        mcp.call("set_disposition", {"shipment_id": "SH-1", "decision": "release", "reason": "WITHIN_LIMITS"})

A tool error (``isError``) raises ToolCallError with the server's message. From the shell:

    python3 mcp_call.py --server "sudo -n /usr/local/bin/coldchain-mcp" get_consignment '{"consignment_id": "CN-1"}'
"""

import argparse
import json
import shlex
import subprocess
import sys


class ToolCallError(Exception):
    pass


class Session:
    def __init__(self, command):
        self.command = shlex.split(command) if isinstance(command, str) else list(command)
        self.proc = None
        self.next_id = 0

    def __enter__(self):
        self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        init = self._request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                            "clientInfo": {"name": "mcp_call", "version": "1"}})
        self.server_info = init.get("serverInfo")
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    def __exit__(self, *exc):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)

    def _send(self, message):
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def _request(self, method, params=None):
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self._send(message)
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise ToolCallError("the MCP server exited before replying to %s" % method)
            try:
                reply = json.loads(line)
            except ValueError:
                continue
            if reply.get("id") == self.next_id and "method" not in reply:
                if "error" in reply:
                    raise ToolCallError("%s failed: %s" % (method, reply["error"].get("message")))
                return reply.get("result") or {}

    def list_tools(self):
        return self._request("tools/list").get("tools", [])

    def call_raw(self, name, arguments=None):
        """The tools/call result as the server sent it."""
        return self._request("tools/call", {"name": name, "arguments": arguments or {}})

    def call(self, name, arguments=None):
        result = self.call_raw(name, arguments)
        text = "\n".join(c.get("text", "") for c in result.get("content") or [] if c.get("type") == "text")
        if result.get("isError"):
            raise ToolCallError("%s: %s" % (name, text))
        if "structuredContent" in result:
            return result["structuredContent"]
        try:
            return json.loads(text)
        except ValueError:
            return text


def main():
    parser = argparse.ArgumentParser(description="Call one tool of an MCP stdio server.")
    parser.add_argument("--server", required=True, help="the server command line")
    parser.add_argument("tool", nargs="?", help="tool name (omit to list the tools)")
    parser.add_argument("arguments", nargs="?", default="{}", help="JSON object of arguments")
    args = parser.parse_args()
    with Session(args.server) as mcp:
        if not args.tool:
            for tool in mcp.list_tools():
                print("%s: %s" % (tool["name"], tool.get("description", "")))
            return 0
        try:
            value = mcp.call(args.tool, json.loads(args.arguments))
        except ToolCallError as exc:
            print(exc, file=sys.stderr)
            return 1
        print(value if isinstance(value, str) else json.dumps(value, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
