"""The tool-calling domain: MCP servers in task.toml, the in-container MCP bridge (stdio, streamable
HTTP, SSE), MCP tools offered to the solver (native and fenced) and recorded in its trajectory, the
seeds, and the domain's admission checks."""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from aes.agents import TerminalAgent
from aes.agents import mcp as agent_mcp
from aes.agents import mcp_bridge
from aes.config import AgentConfig
from aes.models import ToolCall
from aes.sandbox import ExecResult, Outcome, TrialRunner
from aes.tasks import TaskConfigError, load_task, parse_task_toml, render_task_toml
from aes.tasks.mcp import McpServerSpec
from tests.test_agent import Scripted, reply

REPO = Path(__file__).resolve().parents[1]
DOMAIN = REPO / "aes" / "domains" / "tool_calling"
SEEDS = DOMAIN / "seeds"
KIT = DOMAIN / "kit"
CATALOG = SEEDS / "catalog-price-notice"
COLDCHAIN = SEEDS / "coldchain-disposition"

STDIO_TOML = """
[task]
name = "t/mcp"

[[environment.mcp_servers]]
name = "svc"
transport = "stdio"
command = "sudo"
args = ["-n", "/usr/local/bin/svc-mcp"]

[[environment.mcp_servers]]
name = "web"
transport = "http"
url = "http://127.0.0.1:8000/mcp"
headers = { Authorization = "Bearer ${TOKEN}" }
"""


# -- task.toml ---------------------------------------------------------------------------------------
def test_task_toml_accepts_and_parses_mcp_servers():
    spec, doc = parse_task_toml(STDIO_TOML)
    assert spec.mcp_servers == [
        McpServerSpec("svc", "stdio", None, "sudo", ["-n", "/usr/local/bin/svc-mcp"], {}),
        McpServerSpec("web", "streamable-http", "http://127.0.0.1:8000/mcp", None, [],
                      {"Authorization": "Bearer ${TOKEN}"}),
    ]
    again, _ = parse_task_toml(render_task_toml(spec, doc))  # written back unchanged
    assert again.mcp_servers == spec.mcp_servers


@pytest.mark.parametrize("body, words", [
    ('name = "a"\ntransport = "stdio"\n', "'command' is required"),
    ('name = "a"\n', "'url' is required for transport 'sse'"),  # Harbor's default transport
    ('name = "a"\ntransport = "websocket"\nurl = "ws://x"\n', "transport must be one of"),
    ('transport = "stdio"\ncommand = "x"\n', "needs a name"),
    ('name = "a"\ntransport = "stdio"\ncommand = "x"\nheaders = { A = "b" }\n', "only supported for HTTP"),
    ('name = "a"\ntransport = "stdio"\ncommand = "x"\nenv = { A = "b" }\n', "unknown key"),
])
def test_task_toml_rejects_bad_mcp_servers(body, words):
    with pytest.raises(TaskConfigError) as err:
        parse_task_toml(f'[task]\nname = "t/x"\n\n[[environment.mcp_servers]]\n{body}')
    assert err.value.code == "task_toml.bad_value" and words in str(err.value)


def test_two_servers_with_one_name_are_rejected():
    server = '[[environment.mcp_servers]]\nname = "a"\ntransport = "stdio"\ncommand = "x"\n'
    with pytest.raises(TaskConfigError, match="two servers are named"):
        parse_task_toml(server + server)


# -- the bridge, on this machine --------------------------------------------------------------------
@pytest.fixture
def catalog_service(tmp_path) -> list[str]:
    """The catalog seed's service, seeded in a temp dir: its stdio server command."""
    service = tmp_path / "catalog"
    shutil.copytree(CATALOG / "environment" / "service", service)
    subprocess.run([sys.executable, str(service / "seed.py")], check=True)
    return [sys.executable, "-I", str(service / "server.py")]


def _stdio(command: list[str]) -> dict:
    return {"name": "catalog", "transport": "stdio", "command": command[0], "args": command[1:]}


def test_bridge_lists_and_calls_tools_over_stdio(catalog_service):
    out = mcp_bridge.run({"server": _stdio(catalog_service), "timeout": 30, "ops": [
        {"method": "tools/list", "all_pages": True, "key": "tools"},
        {"method": "tools/call", "params": {"name": "get_product", "arguments": {"sku": "SKU-1003"}}},
        {"method": "tools/call", "params": {"name": "get_product", "arguments": {"sku": "nope"}}},
        {"method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}},
    ]})
    assert out["ok"] and out["server"]["name"] == "catalog" and "integer cents" in out["instructions"]
    listed, found, missing, unknown = out["results"]
    assert "update_price" in [t["name"] for t in listed["result"]["tools"]]
    assert found["result"]["structuredContent"]["status"] == "discontinued"
    assert missing["result"]["isError"] and "no product nope" in missing["result"]["content"][0]["text"]
    assert unknown["error"]["code"] == -32602


def test_bridge_reports_a_server_that_dies_or_cannot_start(tmp_path):
    dies = mcp_bridge.run({"server": _stdio([sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"]),
                           "ops": [], "timeout": 10})
    assert not dies["ok"] and "exited (code 3)" in dies["error"] and "boom" in dies["stderr"]
    missing = mcp_bridge.run({"server": _stdio(["/nonexistent/server"]), "ops": [], "timeout": 10})
    assert not missing["ok"] and "could not start" in missing["error"]
    silent = mcp_bridge.run({"server": _stdio([sys.executable, "-c", "import time; time.sleep(30)"]),
                             "ops": [], "timeout": 1})
    assert not silent["ok"] and "timed out" in silent["error"]


def _kit_server():
    sys.path.insert(0, str(KIT))
    try:
        import mcpserver
    finally:
        sys.path.remove(str(KIT))
    server = mcpserver.Server("echo")

    @server.tool("Echo the text back.", {"text": {"type": "string"}}, required=["text"])
    def echo(text):
        return {"echo": text}

    return server


class _HttpMcp(BaseHTTPRequestHandler):
    """Streamable HTTP (JSON or SSE replies) on /mcp and the legacy SSE transport on /sse."""

    server_impl = None
    sse_replies: queue.Queue = queue.Queue()
    seen_headers: list = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b"event: endpoint\ndata: /messages?session=1\n\n")
        self.wfile.flush()
        while True:
            item = self.sse_replies.get()
            if item is None:
                return
            self.wfile.write(b"event: message\ndata: " + json.dumps(item).encode() + b"\n\n")
            self.wfile.flush()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen_headers.append(dict(self.headers))
        answer = self.server_impl.handle(body)
        if self.path.startswith("/messages"):
            if answer is not None:
                self.sse_replies.put(answer)
            self.send_response(202)
            self.end_headers()
            return
        if answer is None:
            self.send_response(202)
            self.end_headers()
            return
        sse = self.path.endswith("/sse-replies")
        data = (b"event: message\ndata: " + json.dumps(answer).encode() + b"\n\n") if sse else json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if sse else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Mcp-Session-Id", "s-1")
        self.end_headers()
        self.wfile.write(data)

    def do_DELETE(self):
        self.send_response(200)
        self.end_headers()


@pytest.fixture
def http_mcp():
    _HttpMcp.server_impl = _kit_server()
    _HttpMcp.seen_headers = []
    _HttpMcp.sse_replies = queue.Queue()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _HttpMcp)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    _HttpMcp.sse_replies.put(None)
    httpd.shutdown()


@pytest.mark.parametrize("transport, path", [("streamable-http", "/mcp"), ("streamable-http", "/mcp/sse-replies"),
                                             ("sse", "/sse")])
def test_bridge_speaks_the_http_transports(http_mcp, transport, path, monkeypatch):
    monkeypatch.setenv("AES_TEST_TOKEN", "t0k")
    server = {"name": "echo", "transport": transport, "url": http_mcp + path,
              "headers": {"Authorization": "Bearer ${AES_TEST_TOKEN}"}}
    out = mcp_bridge.run({"server": server, "timeout": 10, "ops": [
        {"method": "tools/list", "all_pages": True},
        {"method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}]})
    assert out["ok"], out
    assert [t["name"] for t in out["results"][0]["result"]["tools"]] == ["echo"]
    assert out["results"][1]["result"]["structuredContent"] == {"echo": "hi"}
    assert all(h.get("Authorization") == "Bearer t0k" for h in _HttpMcp.seen_headers)
    if transport == "streamable-http":
        assert _HttpMcp.seen_headers[-1].get("Mcp-Session-Id") == "s-1"


# -- MCP tools for the agent (a container stand-in that runs the exec here) --------------------------
class LocalContainer:
    """Runs exec'd commands on this machine: enough for the bridge (no Docker, no shell session)."""

    api = id = workdir = None
    env: dict = {}
    output_limit = 1 << 16

    def __init__(self):
        self.users: list = []

    def exec(self, command, timeout, *, workdir=None, env=None, user=None):
        self.users.append(user)
        try:
            run = subprocess.run(command, capture_output=True, timeout=timeout, text=True)
        except subprocess.TimeoutExpired:
            return ExecResult(None, "", timed_out=True)
        return ExecResult(run.returncode, run.stdout + run.stderr)

    def status(self):
        return "running", None, False


class _Spec:
    def __init__(self, servers, agent_user=None):
        self.mcp_servers, self.agent_user = servers, agent_user


class _Task:
    def __init__(self, servers, instruction="Do the thing.", agent_user=None):
        self.name, self.instruction, self.spec = "t/mcp", instruction, _Spec(servers, agent_user)


def _catalog_task(command, **kw) -> _Task:
    return _Task([McpServerSpec("catalog", "stdio", command=command[0], args=command[1:])], **kw)


def test_attach_offers_the_servers_tools_and_forwards_calls(catalog_service):
    container = LocalContainer()
    box = agent_mcp.attach(_catalog_task(catalog_service, agent_user="agent"), container, fenced=True,
                           call_timeout=30, reserved={"ask_human"})
    names = [t.spec.name for t in box.tools]
    assert names == ["list_notices", "get_notice", "get_product", "list_products", "update_price",
                     "mark_notice_applied", "get_audit_log"]
    update = box.tools[names.index("update_price")]
    assert update.spec.parameters["required"] == ["sku", "price_cents", "reason"]
    # fenced mode: the instruction lists every tool with its parameters, and how to call one
    assert "update_price(sku: string, price_cents: integer, reason: string)" in box.help
    assert "reply with a fenced block holding one line" in box.help and "Server notes:" in box.help
    # calls: JSON arguments, values in schema order, key=value; errors come back as tool errors
    assert json.loads(update.run(update.parse_args('{"sku": "SKU-1001", "price_cents": 279, "reason": "PN-31"}'))) \
        == {"price_cents": 279, "sku": "SKU-1001"}
    assert '"price_cents": 339' in update.run(update.parse_args("SKU-1002 339 PN-31"))
    assert '"price_cents": 299' in update.run(update.parse_args('sku=SKU-1004 price_cents=299 reason="PN 31"'))
    assert update.run(update.parse_args("SKU-1 abc x")).startswith("[tool error]\ninvalid arguments")
    assert update.run(update.parse_args("{not json")).startswith("[tool error]\nthe arguments are not a JSON")
    get = box.tools[names.index("get_product")]
    assert get.run(get.parse_args("nope")) == "[tool error]\nno product nope"
    assert [c["is_error"] for c in box.calls] == [False, False, False, True, True, True]
    assert box.calls[0] == {"tool": "update_price", "server": "catalog", "name": "update_price", "is_error": False,
                            "arguments": {"sku": "SKU-1001", "price_cents": 279, "reason": "PN-31"},
                            "seconds": box.calls[0]["seconds"]}
    assert set(container.users) == {"agent"}  # the server runs as the task's agent user, as Harbor's agents do


def test_tool_names_that_are_taken_get_the_server_prefix(tmp_path):
    script = tmp_path / "server.py"
    shutil.copy(KIT / "mcpserver.py", tmp_path / "mcpserver.py")
    script.write_text(
        "import sys\nsys.path.insert(0, %r)\nfrom mcpserver import Server\n\nserver = Server('svc')\n\n\n"
        "def tool(name):\n    def fn():\n        return 'ok'\n    fn.__name__ = name\n    return fn\n\n\n"
        "for name in ('bash', 'ask_human', 'lookup', 'bad name!'):\n    server.tool('t')(tool(name))\n"
        "server.serve()\n" % str(tmp_path))
    box = agent_mcp.attach(_Task([McpServerSpec("svc", "stdio", command=sys.executable, args=[str(script)])]),
                           LocalContainer(), fenced=False, call_timeout=10, reserved={"ask_human"})
    assert [t.spec.name for t in box.tools] == ["svc__bash", "svc__ask_human", "lookup", "svc__bad_name_"]
    assert box.tools[0].run({}) == "ok" and box.calls[0]["name"] == "bash"
    assert "offered to you as tools besides `bash`" in box.help


def test_an_unreachable_server_is_reported_not_fatal():
    box = agent_mcp.attach(_Task([McpServerSpec("gone", "stdio", command="/nonexistent/server")]),
                           LocalContainer(), fenced=True, call_timeout=10)
    assert box.tools == [] and not box.servers[0]["ok"] and "could not start" in box.servers[0]["error"]
    assert "could not be reached" in box.help
    assert agent_mcp.attach(_Task([]), LocalContainer(), fenced=True, call_timeout=10) is None


def test_render_result_covers_mcp_content_types():
    assert agent_mcp.render_result({"content": [{"type": "text", "text": "a"}, {"type": "image", "data": "xxxx",
                                                                               "mimeType": "image/png"}]}) \
        == "a\n[image content, image/png, 4 base64 characters]"
    assert agent_mcp.render_result({"content": [], "structuredContent": {"x": 1}, "isError": True}) \
        == '[tool error]\n{\n "x": 1\n}'
    assert agent_mcp.render_result({"content": [{"type": "resource", "resource": {"uri": "u", "text": "body"}}]}) == "body"


def test_parse_bridge_output_ignores_noise():
    line = agent_mcp.MARKER + " " + json.dumps({"ok": True, "results": []})
    assert agent_mcp.parse_bridge_output(f"sudo: a warning\n{line}\n")["ok"]
    bad = agent_mcp.parse_bridge_output("bash: python3: not found")
    assert not bad["ok"] and "printed no result" in bad["error"]


def test_fenced_agent_calls_mcp_tools_without_docker(catalog_service):
    """The whole agent loop with the bridge run here: tools listed in the instruction, fenced calls
    forwarded, results in the conversation and the trajectory."""
    model = Scripted([reply('```bash\nget_notice {"notice_id": "PN-31"}\n```'),
                      reply("```bash\nget_product SKU-1003\n```"),
                      reply("DONE")])
    run = TerminalAgent(model, AgentConfig()).run(_catalog_task(catalog_service), LocalContainer(), 60)
    assert "get_notice(notice_id: string)" in model.seen[0][1]["content"]
    assert '"new_price_cents": 219' in model.seen[1][-1]["content"]
    assert '"status": "discontinued"' in model.seen[2][-1]["content"]
    traj = run.info["trajectory"]
    agent_steps = [s for s in traj["steps"] if s["source"] == "agent"]
    assert agent_steps[1]["tool_calls"][0]["function_name"] == "get_product"
    assert agent_steps[1]["tool_calls"][0]["arguments"] == {"sku": "SKU-1003"}
    assert agent_steps[1]["observation"]["results"][0]["extra"]["mcp"]["server"] == "catalog"
    assert [c["name"] for c in traj["extra"]["mcp"]["calls"]] == ["get_notice", "get_product"]
    json.dumps(traj)


# -- domain files -----------------------------------------------------------------------------------
def test_seeds_carry_the_kit_unchanged_and_the_instructions_quote_it():
    seeds = sorted(p for p in SEEDS.iterdir() if p.is_dir())
    assert len(seeds) >= 4
    for seed in seeds:
        assert (seed / "environment" / "service" / "mcpserver.py").read_text() == (KIT / "mcpserver.py").read_text()
        assert (seed / "solution" / "mcp_call.py").read_text() == (KIT / "mcp_call.py").read_text()
        task = load_task(seed)
        assert task.spec.mcp_servers and task.spec.metadata["state_dump_command"] and task.spec.metadata["allowed_changes"]
    kit_doc = (DOMAIN / "instructions" / "kit.md").read_text()
    for name in ("mcpserver.py", "mcp_call.py"):
        assert (KIT / name).read_text().strip() in kit_doc


def test_domain_config_and_checks_are_wired():
    from aes.compose import domain_checks
    from aes.config import compose_config
    from aes.domains import instructions_dir, seeds_dir
    from aes.domains.tool_calling import checks

    cfg = compose_config(["domain=tool_calling"])
    assert cfg.domain.name == "tool_calling" and cfg.domain.reset_check
    assert domain_checks(cfg) is checks.checks
    assert seeds_dir(cfg.domain) == SEEDS
    assert {p.name for p in instructions_dir(cfg.domain).glob("*.md")} >= {"task_format.md", "what_to_build.md"}


def test_state_dumps_flatten_and_diff():
    from aes.domains.tool_calling.checks import changed_keys, flatten

    before = flatten({"users": {"U-1": {"a": 1}, "U-2": {"a": 2}}, "audit": [{"x": 1}]})
    after = flatten({"users": {"U-1": {"a": 1}, "U-2": {"a": 3}}, "audit": [{"x": 1}, {"x": 2}]})
    assert sorted(before) == ["audit/0", "users/U-1", "users/U-2"]
    assert changed_keys(before, after) == ["audit/1", "users/U-2"]
    for bad in ([], {}, {"users": 3}):
        with pytest.raises(ValueError):
            flatten(bad)


def test_checks_need_the_servers_the_dump_and_the_scope(tmp_path):
    from aes.domains.tool_calling.checks import checks

    task = tmp_path / "t"
    shutil.copytree(CATALOG, task)
    toml = (task / "task.toml").read_text()
    toml = toml.split("[[environment.mcp_servers]]")[0]
    toml = "\n".join(line for line in toml.splitlines() if not line.startswith(("state_dump_command", "allowed_changes")))
    (task / "task.toml").write_text(toml)
    codes = [r.code for r in checks(task, runner=None, image="unused")]
    assert codes == ["tool_calling.no_mcp_server", "tool_calling.no_state_dump", "tool_calling.no_allowed_changes"]


# -- the seeds' rewards, on this machine -------------------------------------------------------------
# One write to a record outside each seed's task (the service accepts it; the tests must not).
STRAY_WRITES = {
    "account-offboarding": ("add_membership", {"user_id": "U-212", "group": "alumni"}),
    "catalog-price-notice": ("update_price", {"sku": "SKU-1005", "price_cents": 159, "reason": "PN-31"}),
    "claims-adjudication": ("adjudicate_claim", {"claim_id": "CL-2612-01", "decision": "approve",
                                                 "reason": "COVERED", "payout_cents": 63000}),
    "coldchain-disposition": ("set_disposition", {"shipment_id": "SH-4411-01", "decision": "release",
                                                  "reason": "WITHIN_LIMITS"}),
}


def _local_seed(seed: Path, root: Path):
    """The seed's service seeded under ``root``, its tests reading that database and its reference calling
    that server directly (instead of ``sudo`` in the container): (server command, tests dir, solve.py)."""
    import re

    service = root / "service"
    shutil.copytree(seed / "environment" / "service", service)
    subprocess.run([sys.executable, str(service / "seed.py")], check=True)
    tests = root / "tests"
    shutil.copytree(seed / "tests", tests)
    outputs = tests / "test_outputs.py"
    text, n = re.subn(r'^DB = "/srv/[a-z-]+/state\.db"$', f"DB = {str(service / 'state.db')!r}",
                      outputs.read_text(), flags=re.M)
    assert n == 1, seed.name
    outputs.write_text(text)
    server = [sys.executable, "-I", str(service / "server.py")]
    solution = root / "solution"
    shutil.copytree(seed / "solution", solution)
    solve = solution / "solve.py"
    text, n = re.subn(r'Session\(\["sudo", "-n", "/usr/local/bin/[a-z-]+-mcp"\]\)', f"Session({server!r})",
                      solve.read_text())
    assert n == 1, seed.name
    solve.write_text(text)
    return server, tests, solve


def _local_reward(tests: Path) -> float:
    """What the seed's test.sh writes: its pytest run, then its own reward script (the heredoc), on
    this machine."""
    import re

    junit = tests / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                    "test_outputs.py"], cwd=tests, capture_output=True, check=False)
    script = re.search(r"<<'PY'\n(.*?)\nPY\n", (tests / "test.sh").read_text(), re.S).group(1)
    reward = tests / "reward.txt"
    script = script.replace("/logs/verifier/junit.xml", str(junit)).replace("/logs/verifier/reward.txt", str(reward))
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True)
    return float(reward.read_text())


@pytest.mark.parametrize("name", sorted(STRAY_WRITES))
def test_seed_rewards_nothing_one_and_a_stray_write_below_one(name, tmp_path):
    """App. C.1: doing nothing (or only an unrelated write) earns exactly 0, the reference 1.0, and the
    reference plus one unrelated write less than 1 (partial credit)."""
    import shlex

    assert (SEEDS / name).is_dir()
    tool, args = STRAY_WRITES[name]
    for case in ("nop", "stray_only", "oracle", "oracle_and_stray"):
        server, tests, solve = _local_seed(SEEDS / name, tmp_path / case)
        if case.startswith("oracle"):
            subprocess.run([sys.executable, str(solve)], check=True, capture_output=True)
        if "stray" in case:
            subprocess.run([sys.executable, str(KIT / "mcp_call.py"), "--server", shlex.join(server), tool,
                            json.dumps(args)], check=True, capture_output=True)
        reward = _local_reward(tests)
        expected = {"nop": 0.0, "stray_only": 0.0, "oracle": 1.0}.get(case)
        if expected is None:
            assert 0.0 < reward < 1.0, (case, reward)
        else:
            assert reward == expected, (case, reward)


def test_every_seed_has_a_stray_write_case():
    assert sorted(p.name for p in SEEDS.iterdir() if (p / "task.toml").is_file()) == sorted(STRAY_WRITES)


# -- in Docker --------------------------------------------------------------------------------------
@pytest.fixture
def runner(sandbox, cfg):
    return TrialRunner(cfg.sandbox, sandbox)


COLDCHAIN_DISPOSITIONS = {
    "SH-4410-01": ("release", "WITHIN_LIMITS"), "SH-4410-02": ("release", "WITHIN_LIMITS"),
    "SH-4410-03": ("release", "WITHIN_LIMITS"), "SH-4410-04": ("hold", "SENSOR_FAULTS"),
    "SH-4410-05": ("reject", "EXCURSION_LIMIT"), "SH-4410-06": ("release", "WITHIN_LIMITS"),
    "SH-4410-07": ("reject", "CRITICAL_BREACH"), "SH-4410-08": ("reject", "EXCURSION_LIMIT"),
}


@pytest.mark.docker
def test_scripted_model_with_native_tool_calls_solves_a_seed_through_mcp(runner):
    calls = [("get_policy", {}), ("get_consignment", {"consignment_id": "CN-4410"}),
             ("get_readings", {"shipment_id": "SH-4410-03"})]
    calls += [("set_disposition", {"shipment_id": s, "decision": d, "reason": r})
              for s, (d, r) in COLDCHAIN_DISPOSITIONS.items()]
    calls += [("close_consignment", {"consignment_id": "CN-4410"})]
    replies = [reply(calls=[ToolCall(f"c{i}", name, args)]) for i, (name, args) in enumerate(calls)]
    replies += [reply(calls=[ToolCall("peek", "bash", {"command": "cat /srv/coldchain/state.db"})]),
                reply(calls=[ToolCall("end", "submit", {})])]
    model = Scripted(replies, tools=True)
    result = runner.run(load_task(COLDCHAIN), TerminalAgent(model, AgentConfig()))
    assert result.outcome is Outcome.OK and result.reward == 1.0, result.verifier_output[-2000:]
    traj = result.agent_info["trajectory"]
    offered = [t["name"] for t in traj["agent"]["tool_definitions"]]
    assert offered[0] == "bash" and offered[-1] == "submit" and "set_disposition" in offered
    steps = [s for s in traj["steps"] if s["source"] == "agent"]
    assert [s["tool_calls"][0]["function_name"] for s in steps[:len(calls)]] == [name for name, _ in calls]
    readings = steps[2]["observation"]["results"][0]
    assert '"flag": "SENSOR_FAULT"' in readings["content"]
    assert readings["extra"]["mcp"] == {"server": "coldchain", "name": "get_readings", "is_error": False,
                                        "seconds": readings["extra"]["mcp"]["seconds"]}
    assert [c["name"] for c in traj["extra"]["mcp"]["calls"]] == [name for name, _ in calls]
    assert traj["extra"]["mcp"]["servers"][0]["ok"] and traj["extra"]["mcp"]["servers"][0]["tools"] == 8
    # the tool results went back to the model as tool messages
    assert any(m.get("role") == "tool" and '"status": "closed"' in m["content"] for m in model.seen[len(calls)])
    # the service's data is out of the agent's reach: only its tools change it
    assert "Permission denied" in steps[len(calls)]["observation"]["results"][0]["content"]


def _catalog_fenced(extra: list[str]) -> list:
    lines = ['get_notice {"notice_id": "PN-31"}', "update_price SKU-1001 279 PN-31",
             'update_price {"sku": "SKU-1002", "price_cents": 339, "reason": "PN-31"}',
             "update_price sku=SKU-1004 price_cents=299 reason=PN-31", *extra, "mark_notice_applied PN-31"]
    return [reply(f"```bash\n{line}\n```") for line in lines] + [reply("DONE")]


@pytest.mark.docker
def test_fenced_model_earns_the_reward_and_an_unrelated_write_fails_the_tests(runner):
    task = load_task(CATALOG)
    clean = runner.run(task, TerminalAgent(Scripted(_catalog_fenced([])), AgentConfig()))
    assert clean.outcome is Outcome.OK and clean.reward == 1.0, clean.verifier_output[-2000:]
    assert [c["name"] for c in clean.agent_info["trajectory"]["extra"]["mcp"]["calls"]] == \
        ["get_notice", "update_price", "update_price", "update_price", "mark_notice_applied"]
    stray = runner.run(task, TerminalAgent(Scripted(_catalog_fenced(["update_price SKU-1005 159 PN-31"])),
                                           AgentConfig()))
    assert stray.outcome is Outcome.OK and stray.reward < 1.0
    assert "test_discontinued_and_unlisted_products_untouched" in stray.verifier_output


@pytest.mark.docker
def test_domain_checks_catch_a_stray_reference_and_a_server_that_writes_on_start(runner, tmp_path):
    from aes.domains.tool_calling.checks import checks

    stray = tmp_path / "stray"
    shutil.copytree(CATALOG, stray)
    solve = stray / "solution" / "solve.py"
    solve.write_text(solve.read_text().replace(
        '    print(mcp.call("mark_notice_applied"',
        '    mcp.call("update_price", {"sku": "SKU-2002", "price_cents": 1, "reason": "oops"})\n'
        '    print(mcp.call("mark_notice_applied"'))
    chatty = tmp_path / "chatty"
    shutil.copytree(CATALOG, chatty)
    server = chatty / "environment" / "service" / "server.py"
    server.write_text(server.read_text().replace(
        'if __name__ == "__main__":\n',
        'if __name__ == "__main__":\n    c = db()\n    c.execute("INSERT INTO audit (action, target, detail) '
        "VALUES ('session', '-', '-')\")\n    c.commit()\n"))
    reasons = {}
    for name, path in (("stray", stray), ("chatty", chatty)):
        build = runner.sandbox.build(load_task(path))
        assert build.image, build.reason
        reasons[name] = checks(path, runner, build.image)
    assert [r.code for r in reasons["stray"]] == ["tool_calling.reference_out_of_scope"]
    assert "products/SKU-2002" in reasons["stray"][0].message
    assert "tool_calling.nop_changed_state" in [r.code for r in reasons["chatty"]]


@pytest.mark.docker
def test_seeds_pass_aes_validate_with_the_domain_checks():
    from typer.testing import CliRunner

    from aes.cli import app

    result = CliRunner().invoke(app, ["validate", str(SEEDS), "--set", "domain=tool_calling", "--quiet"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "4/4 valid" in result.output
