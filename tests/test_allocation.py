"""launchers/allocation.py, servers around any command (aes/cluster's server code): server up
before the command, the command sees its URL, server down after, status kept; a server that
dies names its log.

A small HTTP server stands in for vLLM here (vLLM needs a GPU); what is tested is the
process management around it. The job's own session (aes.run with a cluster section) is
tests/test_cluster.py and tests/test_cluster_job.py.
"""

from __future__ import annotations

import socket
import subprocess
import sys

from tests.conftest import REPO

SERVER = ("import http.server as h, sys\n"
          "class H(h.BaseHTTPRequestHandler):\n"
          "    def do_GET(self):\n"
          "        self.send_response(200); self.end_headers(); self.wfile.write(b'ok')\n"
          "    def log_message(self, *a): pass\n"
          "h.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(tmp_path, command: str) -> tuple[subprocess.CompletedProcess, int]:
    port = free_port()
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    proc = subprocess.run(
        [sys.executable, str(REPO / "launchers" / "allocation.py"), "--model", "m", "--port", str(port),
         "--server-cmd", f"{sys.executable} {script} {port}", "--health-timeout", "60", "--",
         sys.executable, "-c", command], capture_output=True, text=True, timeout=120)
    return proc, port


def port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_server_serves_the_run_and_is_stopped_after(tmp_path):
    check = ("import sys, urllib.request\n"
             "url = sys.argv[1].split('=', 1)[1].replace('/v1', '/health')\n"
             "print(urllib.request.urlopen(url.replace(url.split('/')[2].split(':')[0], '127.0.0.1')).read())\n")
    proc, port = run(tmp_path, check)
    assert proc.returncode == 0, proc.stderr
    assert "b'ok'" in proc.stdout
    assert not port_open(port)


def test_failed_run_fails_the_job(tmp_path):
    proc, port = run(tmp_path, "raise SystemExit(3)")
    assert proc.returncode == 3 and not port_open(port)


def test_a_server_that_dies_fails_the_job_with_its_log(tmp_path):
    port = free_port()
    proc = subprocess.run(
        [sys.executable, str(REPO / "launchers" / "allocation.py"), "--model", "m", "--port", str(port),
         "--server-cmd", f"{sys.executable} -c 'import sys; print(\"no GPU here\"); sys.exit(3)'",
         "--log-dir", str(tmp_path), "--health-timeout", "60", "--", sys.executable, "-c", "print('never')"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "never" not in proc.stdout
    assert "exited with status 3" in proc.stderr and str(tmp_path / "server-0.log") in proc.stderr
    assert "no GPU here" in proc.stderr
