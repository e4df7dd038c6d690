"""The in-container half of aes's MCP client: a standalone script (standard library only, Python 3.7+)
that aes runs inside a task's container for every batch of MCP requests (:mod:`aes.agents.mcp`).

    python3 - BASE64_JSON_CONFIG < this_file

The config names one server (Harbor's ``[[environment.mcp_servers]]`` entry) and the requests to
make. The script connects as an MCP client (``stdio``: it starts the server command and speaks
newline-delimited JSON-RPC on its stdin/stdout; ``streamable-http``: it POSTs to the URL; ``sse``:
it opens the event stream and POSTs to the endpoint it announces), runs the ``initialize``
handshake, makes the requests in order, disconnects, and prints one line: the marker and a JSON
object with each request's result or error. So the agent's calls reach a server inside a container
without a network, and a stdio server lives only for the calls it serves (its state must be kept
in files, which is also what the verifier sees).
"""

import base64
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time

MARKER = "__AES_MCP_RESULT__"
PROTOCOL = "2025-06-18"
_TAIL = 2000


class BridgeError(Exception):
    pass


def _expand(value):
    """``${VAR}`` and ``${VAR:-default}`` from the container's environment (Harbor's header syntax)."""
    def sub(match):
        name, default = match.group(1), match.group(3)
        return os.environ.get(name, default if default is not None else "")
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}", sub, value)


def _answer_server_request(message):
    """The reply to a request the server makes of the client (sampling, elicitation: not offered)."""
    method = message.get("method")
    if method == "ping":
        return {"jsonrpc": "2.0", "id": message["id"], "result": {}}
    if method == "roots/list":
        return {"jsonrpc": "2.0", "id": message["id"], "result": {"roots": []}}
    return {"jsonrpc": "2.0", "id": message["id"],
            "error": {"code": -32601, "message": "the aes client does not offer %s" % method}}


class Stdio:
    def __init__(self, server, deadline):
        self.deadline = deadline
        self.err = tempfile.TemporaryFile()
        argv = [server["command"]] + list(server.get("args") or [])
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err)
        except OSError as exc:
            raise BridgeError("could not start the server command %r: %s" % (" ".join(argv), exc))
        self.lines = queue.Queue()
        self.noise = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.put(line)
        self.lines.put(None)

    def send(self, message):
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise BridgeError("the server closed its input (exit code %s)" % self.proc.poll())

    def receive(self, wanted):
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise BridgeError("timed out waiting for the server's reply")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                raise BridgeError("timed out waiting for the server's reply")
            if line is None:
                self.proc.wait(timeout=max(self.deadline - time.monotonic(), 0.1))
                raise BridgeError("the server exited (code %s) before replying" % self.proc.returncode)
            text = line.decode("utf-8", "replace").strip()
            if not text:
                continue
            try:
                message = json.loads(text)
            except ValueError:
                if len(self.noise) < 5:
                    self.noise.append(text[:200])
                continue
            for item in (message if isinstance(message, list) else [message]):
                if not isinstance(item, dict):
                    continue
                if "method" in item and "id" in item:
                    self.send(_answer_server_request(item))
                elif "method" not in item and item.get("id") == wanted:
                    return item

    def stderr_tail(self):
        try:
            self.err.seek(0)
            data = self.err.read()
        except OSError:
            return ""
        return data[-_TAIL:].decode("utf-8", "replace")

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _sse_events(stream):
    """(event, data) pairs of a text/event-stream response."""
    event, data = "message", []
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
    if data:
        yield event, "\n".join(data)


class _Http:
    def __init__(self, server, deadline):
        self.url = server["url"]
        self.headers = dict((k, _expand(v)) for k, v in (server.get("headers") or {}).items())
        self.deadline = deadline
        self.noise = []

    def _timeout(self):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise BridgeError("timed out waiting for the server's reply")
        return left

    def _open(self, request):
        import urllib.error
        import urllib.request

        try:
            return urllib.request.urlopen(request, timeout=self._timeout())
        except urllib.error.HTTPError as exc:
            body = exc.read()[:500].decode("utf-8", "replace")
            raise BridgeError("HTTP %s from %s: %s" % (exc.code, request.full_url, body))
        except (urllib.error.URLError, OSError) as exc:
            raise BridgeError("cannot reach %s: %s" % (request.full_url, exc))

    def stderr_tail(self):
        return ""


class StreamableHttp(_Http):
    def __init__(self, server, deadline):
        _Http.__init__(self, server, deadline)
        self.session = None
        self.protocol = None
        self.pending = {}

    def _post(self, message):
        import urllib.request

        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        headers.update(self.headers)
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        if self.protocol:
            headers["MCP-Protocol-Version"] = self.protocol
        request = urllib.request.Request(self.url, data=json.dumps(message).encode(), headers=headers, method="POST")
        response = self._open(request)
        self.session = response.headers.get("Mcp-Session-Id") or self.session
        return response

    def send(self, message):
        response = self._post(message)
        if "id" not in message or "method" not in message:
            response.close()
            return
        ctype = (response.headers.get("Content-Type") or "").lower()
        try:
            if "text/event-stream" in ctype:
                for _, data in _sse_events(response):
                    if self._take(data, message["id"]):
                        break
            else:
                body = response.read()
                if body.strip():
                    self._take(body.decode("utf-8", "replace"), message["id"])
        finally:
            response.close()

    def _take(self, text, wanted):
        try:
            message = json.loads(text)
        except ValueError:
            if len(self.noise) < 5:
                self.noise.append(text[:200])
            return False
        found = False
        for item in (message if isinstance(message, list) else [message]):
            if not isinstance(item, dict):
                continue
            if "method" in item and "id" in item:
                self.send(_answer_server_request(item))
            elif "method" not in item and "id" in item:
                self.pending[item["id"]] = item
                found = found or item["id"] == wanted
        return found

    def receive(self, wanted):
        if wanted not in self.pending:
            raise BridgeError("the server sent no reply to request %s" % wanted)
        return self.pending.pop(wanted)

    def close(self):
        if not self.session:
            return
        import urllib.request

        headers = dict(self.headers)
        headers["Mcp-Session-Id"] = self.session
        try:
            self._open(urllib.request.Request(self.url, headers=headers, method="DELETE")).close()
        except BridgeError:
            pass


class LegacySse(_Http):
    def __init__(self, server, deadline):
        import urllib.parse
        import urllib.request

        _Http.__init__(self, server, deadline)
        headers = {"Accept": "text/event-stream"}
        headers.update(self.headers)
        self.stream = self._open(urllib.request.Request(self.url, headers=headers))
        self.events = _sse_events(self.stream)
        for event, data in self.events:
            if event == "endpoint":
                self.endpoint = urllib.parse.urljoin(self.url, data.strip())
                break
        else:
            raise BridgeError("the SSE stream at %s announced no endpoint" % self.url)

    def send(self, message):
        import urllib.request

        headers = {"Content-Type": "application/json"}
        headers.update(self.headers)
        request = urllib.request.Request(self.endpoint, data=json.dumps(message).encode(), headers=headers,
                                         method="POST")
        self._open(request).close()

    def receive(self, wanted):
        for event, data in self.events:
            if event != "message":
                continue
            try:
                message = json.loads(data)
            except ValueError:
                continue
            for item in (message if isinstance(message, list) else [message]):
                if not isinstance(item, dict):
                    continue
                if "method" in item and "id" in item:
                    self.send(_answer_server_request(item))
                elif "method" not in item and item.get("id") == wanted:
                    return item
        raise BridgeError("the SSE stream closed before the reply to request %s" % wanted)

    def close(self):
        try:
            self.stream.close()
        except OSError:
            pass


TRANSPORTS = {"stdio": Stdio, "streamable-http": StreamableHttp, "http": StreamableHttp, "sse": LegacySse}


def run(config):
    """Connect, initialize, make ``config["ops"]`` in order; the result object."""
    server = config["server"]
    deadline = time.monotonic() + float(config.get("timeout", 60))
    out = {"ok": False, "results": []}
    transport = None
    next_id = [0]

    def request(method, params):
        next_id[0] += 1
        message = {"jsonrpc": "2.0", "id": next_id[0], "method": method}
        if params is not None:
            message["params"] = params
        transport.send(message)
        return transport.receive(next_id[0])

    try:
        kind = TRANSPORTS.get(server.get("transport") or "sse")
        if kind is None:
            raise BridgeError("unknown transport %r" % server.get("transport"))
        transport = kind(server, deadline)
        init = request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                      "clientInfo": config.get("client") or {"name": "aes", "version": "1"}})
        if "error" in init:
            raise BridgeError("initialize failed: %s" % json.dumps(init["error"])[:500])
        info = init.get("result") or {}
        out["server"] = info.get("serverInfo")
        out["protocol"] = info.get("protocolVersion")
        out["instructions"] = info.get("instructions")
        if isinstance(transport, StreamableHttp):
            transport.protocol = info.get("protocolVersion")
        transport.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for op in config.get("ops") or []:
            method, params = op["method"], op.get("params")
            if op.get("all_pages"):
                merged, cursor, key = None, None, op.get("key", "tools")
                for _ in range(100):
                    page_params = dict(params or {})
                    if cursor:
                        page_params["cursor"] = cursor
                    reply = request(method, page_params or None)
                    if "error" in reply:
                        merged = reply
                        break
                    result = reply.get("result") or {}
                    if merged is None:
                        merged = {"result": dict(result)}
                    else:
                        merged["result"][key] = merged["result"].get(key, []) + list(result.get(key) or [])
                    cursor = result.get("nextCursor")
                    if not cursor:
                        break
                if "result" in merged:
                    merged["result"].pop("nextCursor", None)
                out["results"].append(merged)
            else:
                reply = request(method, params)
                out["results"].append({k: reply[k] for k in ("result", "error") if k in reply})
        out["ok"] = True
    except BridgeError as exc:
        out["error"] = str(exc)
    except Exception as exc:  # noqa: BLE001 - whatever broke is reported, never a traceback on stdout
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
    finally:
        if transport is not None:
            transport.close()
            if not out["ok"]:
                out["stderr"] = transport.stderr_tail()
            if transport.noise:
                out["noise"] = transport.noise
    return out


def main(argv):
    config = json.loads(base64.b64decode(argv[1]).decode("utf-8"))
    result = run(config)
    sys.stdout.write("\n" + MARKER + " " + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
