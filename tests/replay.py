"""A local HTTP server that replays recorded API responses to the real SDK clients.

``tests/fixtures/model_responses/*.json`` hold one response each and
``tests/fixtures/replays/*.json`` whole recorded episodes: ``status``, ``headers`` and ``body``
as the provider sends them. The server answers each request with the next scripted response
and records what it received (path, headers, JSON body) for the test to check. ``rejects``
plays what the API does with a parameter a model does not accept: a request whose body holds
one of its keys (with a value not in the response's ``accepted`` list) gets that key's error
response instead of the next scripted one.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

RESPONSES = Path(__file__).parent / "fixtures" / "model_responses"
REPLAYS = Path(__file__).parent / "fixtures" / "replays"


def recorded(name: str) -> dict[str, Any]:
    return json.loads((RESPONSES / f"{name}.json").read_text())


class ReplayServer:
    """Answers each request (POST or GET) with the next scripted response and records what it received."""

    def __init__(self) -> None:
        self.script: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.rejects: dict[str, dict[str, Any]] = {}
        """Body key -> the error response a request carrying it gets, unless its value is one of the
        response's ``accepted`` (the script is not consumed)."""
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                body = json.loads(raw or b"null")
                with server._lock:
                    server.requests.append({"path": self.path,
                                            "headers": {k.lower(): v for k, v in self.headers.items()},
                                            "body": body})
                    rejected = [k for k, r in server.rejects.items() if isinstance(body, dict) and k in body
                                and body[k] not in r.get("accepted", [])]
                    if rejected:
                        reply = server.rejects[rejected[0]]
                    else:
                        reply = server.script.pop(0) if server.script else {
                            "status": 500, "headers": {}, "body": {"error": {"message": "replay script exhausted"}}}
                if reply.get("delay"):
                    time.sleep(reply["delay"])
                data = json.dumps(reply["body"]).encode()
                try:
                    self.send_response(reply["status"])
                    for key, value in reply.get("headers", {}).items():
                        if key.lower() != "content-length":
                            self.send_header(key, value)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (timeout test)
                    pass

            do_GET = do_POST  # noqa: N815 - health checks list the models

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01},
                                       daemon=True)

    def push(self, *replies: str | dict[str, Any]) -> None:
        """Queue replies: fixture names or envelopes ``{"status", "headers", "body"[, "delay"]}``."""
        self.script.extend(recorded(r) if isinstance(r, str) else r for r in replies)

    @property
    def bodies(self) -> list[Any]:
        return [r["body"] for r in self.requests]


@contextlib.contextmanager
def replay_server() -> Iterator[ReplayServer]:
    srv = ReplayServer()
    srv.thread.start()
    try:
        yield srv
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()


def offline(monkeypatch, key_env: str) -> None:
    """A test key in ``key_env`` and no proxy between the SDK and the local server."""
    monkeypatch.setenv(key_env, "sk-test-123")
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
