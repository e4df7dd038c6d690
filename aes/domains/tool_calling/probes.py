"""The tool-calling domain's wrong-work probe: blanket decisions (``tool_calling.blanket_rewarded``).

An RL policy that never reads the policy takes one action for every record and closes. The probe
derives that attempt from the reference itself: the task's stdio MCP server executables are
wrapped (as root, in the probe's own container) by a proxy that passes every message through but
rewrites each ``tools/call``: from the second call of a tool on, every argument that is not an
identifier takes the value it had in that tool's first call (the same decision, reason and amount
for every record). The reference's ``solve.sh`` then runs as the agent would, through the wrapped
servers, and the verifier scores what it left. A task whose tests give that 0.5 or more pays for
the bookkeeping, not the decisions, and is rejected.

An argument is an identifier when its name ends in ``id``/``ids``, is ``sku``, ``key``, ``code`` or
``ref``, or its value looks like a record id (``CL-2611-02``, ``U-207``). The probe cannot tell
(and gives no reason) when no call had an argument to rewrite (a task whose calls already agree),
when the reference reached no wrapped server, or when the task has no stdio server.
"""

from __future__ import annotations

import json
import shlex

from aes.sandbox import AgentRun, OracleAgent
from aes.tasks import Reason

BLANKET_MAX = 0.5
"""A blanket attempt earning this much or more is rejected."""
LOG = "/run/aes-blanket/calls.jsonl"
PROXY_PATH = "/run/aes-blanket/proxy.py"

PROXY = r'''
import json, os, re, subprocess, sys, threading
LOG = %r
ID_NAME = re.compile(r"(?i)(^|_)(ids?|sku|key|code|ref)$|id$")
ID_VALUE = re.compile(r"^[A-Z][A-Z0-9]{0,7}-[A-Za-z0-9][A-Za-z0-9_-]*$")
first = {}
real = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=sys.stdout.buffer)

def blanket(name, args):
    if not isinstance(args, dict):
        return args, []
    if name not in first:
        first[name] = dict(args)
        return args, []
    out, changed = dict(args), []
    for key, value in args.items():
        if ID_NAME.search(key) or (isinstance(value, str) and ID_VALUE.match(value)):
            continue
        if key in first[name] and first[name][key] != value and isinstance(value, (str, int, float, bool)):
            out[key] = first[name][key]
            changed.append(key)
    return out, changed

for line in sys.stdin.buffer:
    try:
        message = json.loads(line)
    except ValueError:
        message = None
    if isinstance(message, dict) and message.get("method") == "tools/call" and isinstance(message.get("params"), dict):
        params = message["params"]
        params["arguments"], changed = blanket(params.get("name"), params.get("arguments"))
        with open(LOG, "a") as log:
            log.write(json.dumps({"tool": params.get("name"), "changed": changed}) + "\n")
        line = (json.dumps(message) + "\n").encode()
    real.stdin.write(line)
    real.stdin.flush()
real.stdin.close()
sys.exit(real.wait())
''' % LOG

WRAP = r'''set -e
mkdir -p /run/aes-blanket && chmod 755 /run/aes-blanket && : > %(log)s && chmod 666 %(log)s
printf '%%s' "$0" > %(proxy)s
for exe in "$@"; do
  [ -f "$exe" ] && [ ! -e "$exe.aes-real" ] || continue
  mv "$exe" "$exe.aes-real"
  printf '#!/bin/sh\nexec python3 %(proxy)s %%s.aes-real "$@"\n' "$exe" > "$exe"
  chmod 755 "$exe"
  echo "wrapped $exe"
done
''' % {"log": LOG, "proxy": PROXY_PATH}


def server_executables(task) -> list[str]:
    """The programs the task's stdio MCP servers run, by absolute path (behind ``sudo -n`` and the
    like); a server started through an interpreter (``python3 /srv/x/server.py``) is not wrapped."""
    found = []
    for server in task.spec.mcp_servers:
        if server.transport != "stdio" or not server.command:
            continue
        words = shlex.split(server.command) + list(server.args)
        program = next((w for w in words if w not in ("sudo", "env", "exec", "nice") and not w.startswith("-")), None)
        if program and program.startswith("/") and program not in found:
            found.append(program)
    return found


class Blanket(OracleAgent):
    """A check agent: the reference's solve.sh, through its MCP servers wrapped by the blanket proxy.
    ``info``: ``wrapped`` (the executables), ``calls`` (tools/call seen), ``rewritten`` (calls
    whose arguments the proxy changed), ``solve_exit``."""

    name = "tool-calling-blanket-probe"

    def run(self, task, container, timeout: float) -> AgentRun:
        targets = server_executables(task)
        wrap = container.exec(["sh", "-c", WRAP, PROXY, *targets], 60, user="0")
        info: dict = {"wrapped": [line[len("wrapped "):] for line in wrap.output.splitlines()
                                  if line.startswith("wrapped ")], "wrap_exit": wrap.exit_code}
        run = super().run(task, container, timeout)
        log = container.exec(["cat", LOG], 30, user="0")
        calls = []
        for line in log.output.splitlines():
            try:
                calls.append(json.loads(line))
            except ValueError:
                continue
        info.update(calls=len(calls), rewritten=sum(bool(c.get("changed")) for c in calls),
                    solve_exit=run.exit_code)
        run.info = {**run.info, **info}
        return run


def blanket_reasons(trial) -> list[Reason]:
    """``tool_calling.blanket_rewarded`` when the blanket attempt earned :data:`BLANKET_MAX` or more."""
    info = trial.agent_info
    if not info.get("wrapped") or not info.get("rewritten") or info.get("solve_exit") != 0 or trial.reward is None:
        return []  # cannot tell: nothing wrapped, nothing to rewrite, or the probe's reference did not finish
    if trial.reward >= BLANKET_MAX:
        return [Reason("tool_calling.blanket_rewarded",
                       f"its tests pay for a blanket attempt: the reference with every record given the first "
                       f"record's decision ({info['rewritten']} of {info['calls']} tool calls rewritten) earns "
                       f"{trial.reward:.2f} (at least {BLANKET_MAX}); the decisions must carry the reward: gate "
                       "the bookkeeping tests (closed, untouched, audit ledger) on every decision being right, "
                       "as the task format's test.sh does")]
    return []
