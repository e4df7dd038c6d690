"""Only the substance reaches 0.5 in the tool-calling domain (issue 25): three wrong-but-plausible
attempts per seed (a blanket decision for every record, the bookkeeping alone, a rule half read)
earn under 0.5 - on this machine against each seed's own service and reward script, and in Docker
as the agent's solve.sh - and the wrong-work probe (``tool_calling.blanket_rewarded``) rejects a
seed whose test.sh pays by the fraction of tests (bookkeeping ungated), while the seeds pass it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from aes.sandbox import OracleAgent, TrialRunner
from aes.tasks import load_task
from tests.test_domain_tool_calling import SEEDS, _local_reward, _local_seed

SESSION = {"account-offboarding": "directory", "catalog-price-notice": "catalog", "claims-adjudication": "claims",
           "coldchain-disposition": "coldchain"}
HEAD = '''import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_call import Session
with Session(["sudo", "-n", "/usr/local/bin/{svc}-mcp"]) as mcp:
'''
WRONG = {
    "account-offboarding": {
        # disables her account and stops there (tickets and groups as they were)
        "disable-only": '''    [u] = [u for u in mcp.call("find_users", {"query": "Dana Whitfield"})["users"] if u["name"] == "Dana Whitfield"]
    mcp.call("disable_user", {"user_id": u["id"], "reason": "offboarded"})''',
        # hands her open tickets to the manager, nothing else
        "tickets-only": '''    [u] = [u for u in mcp.call("find_users", {"query": "Dana Whitfield"})["users"] if u["name"] == "Dana Whitfield"]
    manager = mcp.call("get_user", {"user_id": u["id"]})["manager_id"]
    for t in mcp.call("list_tickets", {"owner_id": u["id"]})["tickets"]:
        if t["status"] != "closed":
            mcp.call("reassign_ticket", {"ticket_id": t["id"], "new_owner_id": manager})''',
        # never reads the policy: adds alumni, disables with a reason of its own
        "no-policy": '''    [u] = [u for u in mcp.call("find_users", {"query": "Dana Whitfield"})["users"] if u["name"] == "Dana Whitfield"]
    mcp.call("add_membership", {"user_id": u["id"], "group": "alumni"})
    mcp.call("disable_user", {"user_id": u["id"], "reason": "left the company"})''',
    },
    "catalog-price-notice": {
        # applies every line of the notice, never looking at the product's status
        "every-line": '''    for line in mcp.call("get_notice", {"notice_id": "PN-31"})["lines"]:
        mcp.call("update_price", {"sku": line["sku"], "price_cents": line["new_price_cents"], "reason": "PN-31"})
    mcp.call("mark_notice_applied", {"notice_id": "PN-31"})''',
        "mark-applied-only": '''    mcp.call("mark_notice_applied", {"notice_id": "PN-31"})''',
        "first-line-only": '''    line = mcp.call("get_notice", {"notice_id": "PN-31"})["lines"][0]
    mcp.call("update_price", {"sku": line["sku"], "price_cents": line["new_price_cents"], "reason": "PN-31"})
    mcp.call("mark_notice_applied", {"notice_id": "PN-31"})''',
    },
    "claims-adjudication": {
        "approve-all": '''    for c in mcp.call("get_batch", {"batch_id": "B-2611"})["claims"]:
        mcp.call("adjudicate_claim", {"claim_id": c["claim_id"], "decision": "approve", "reason": "COVERED",
                                      "payout_cents": c["amount_cents"]})
    mcp.call("close_batch", {"batch_id": "B-2611"})''',
        "deny-all": '''    for c in mcp.call("get_batch", {"batch_id": "B-2611"})["claims"]:
        mcp.call("adjudicate_claim", {"claim_id": c["claim_id"], "decision": "deny", "reason": "NOT_COVERED",
                                      "payout_cents": 0})
    mcp.call("close_batch", {"batch_id": "B-2611"})''',
        # the deductible read, every other rule of the guide skipped
        "deductible-only": '''    for c in mcp.call("get_batch", {"batch_id": "B-2611"})["claims"]:
        payable = c["amount_cents"] - mcp.call("get_policy", {"policy_id": c["policy_id"]})["deductible_cents"]
        args = ({"decision": "approve", "reason": "COVERED", "payout_cents": payable} if payable > 0 else
                {"decision": "deny", "reason": "BELOW_DEDUCTIBLE", "payout_cents": 0})
        mcp.call("adjudicate_claim", {"claim_id": c["claim_id"], **args})
    mcp.call("close_batch", {"batch_id": "B-2611"})''',
    },
    "coldchain-disposition": {
        "release-all": '''    for s in mcp.call("get_consignment", {"consignment_id": "CN-4410"})["shipments"]:
        mcp.call("set_disposition", {"shipment_id": s, "decision": "release", "reason": "WITHIN_LIMITS"})
    mcp.call("close_consignment", {"consignment_id": "CN-4410"})''',
        "reject-all": '''    for s in mcp.call("get_consignment", {"consignment_id": "CN-4410"})["shipments"]:
        mcp.call("set_disposition", {"shipment_id": s, "decision": "reject", "reason": "CRITICAL_BREACH"})
    mcp.call("close_consignment", {"consignment_id": "CN-4410"})''',
        # the critical temperature read, sensor faults and the excursion allowance skipped
        "critical-only": '''    p = mcp.call("get_policy")["parameters"]
    for s in mcp.call("get_consignment", {"consignment_id": "CN-4410"})["shipments"]:
        temps = [r["temp_c"] for r in mcp.call("get_readings", {"shipment_id": s})["readings"]]
        hot = any(t > p["critical_temp_c"] for t in temps)
        mcp.call("set_disposition", {"shipment_id": s, "decision": "reject" if hot else "release",
                                     "reason": "CRITICAL_BREACH" if hot else "WITHIN_LIMITS"})
    mcp.call("close_consignment", {"consignment_id": "CN-4410"})''',
    },
}


def _script(seed: str, body: str) -> str:
    return HEAD.replace("{svc}", SESSION[seed]) + body + "\n"


def test_three_wrong_attempts_per_seed():
    assert sorted(WRONG) == sorted(p.name for p in SEEDS.iterdir() if (p / "task.toml").is_file())
    assert all(len(attempts) >= 3 for attempts in WRONG.values())


@pytest.mark.parametrize("seed", sorted(WRONG))
def test_wrong_attempts_earn_under_half_on_this_machine(seed, tmp_path):
    rewards = {}
    for name, body in WRONG[seed].items():
        _, tests, solve = _local_seed(SEEDS / seed, tmp_path / name)
        solve.write_text(_script(seed, body))
        _, tests, solve = _local_seed_again(SEEDS / seed, tmp_path / name, solve)
        run = subprocess.run([sys.executable, str(solve)], capture_output=True, text=True)
        assert run.returncode == 0, (name, run.stderr[-2000:])
        rewards[name] = _local_reward(tests)
    print(seed, rewards)
    assert all(reward < 0.5 for reward in rewards.values()), rewards


def _local_seed_again(seed: Path, root: Path, solve: Path):
    """``solve`` (written in the container's form) pointed at the local server, as _local_seed does."""
    import re

    server = [sys.executable, "-I", str(root / "service" / "server.py")]
    text, n = re.subn(r'Session\(\["sudo", "-n", "/usr/local/bin/[a-z-]+-mcp"\]\)', f"Session({server!r})",
                      solve.read_text())
    assert n == 1
    solve.write_text(text)
    return server, root / "tests", solve


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("seed", sorted(WRONG))
def test_wrong_attempts_earn_under_half_as_the_agents_work(sandbox, cfg, seed, tmp_path):
    import shutil

    runner = TrialRunner(cfg.sandbox, sandbox)
    rewards = {}
    for name, body in WRONG[seed].items():
        path = tmp_path / name
        shutil.copytree(SEEDS / seed, path)
        (path / "solution" / "solve.py").write_text(_script(seed, body))
        result = runner.run(load_task(path), OracleAgent())
        assert result.agent_exit_code == 0, (name, result.agent_output[-2000:])
        rewards[name] = result.reward
    print(seed, rewards)
    assert all(reward is not None and reward < 0.5 for reward in rewards.values()), rewards


UNGATED = '''#!/bin/bash
cd /tests
python3 -m pytest -q -p no:cacheprovider --junitxml=/logs/verifier/junit.xml test_outputs.py
python3 - <<'PY'
import xml.etree.ElementTree as ET
suite = ET.parse("/logs/verifier/junit.xml").getroot()
suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
total = int(suite.get("tests"))
failed = sum(int(suite.get(k, 0)) for k in ("failures", "errors", "skipped"))
open("/logs/verifier/reward.txt", "w").write(f"{(total - failed) / total:.4f}\\n")
PY
'''


@pytest.mark.docker
@pytest.mark.slow
def test_the_blanket_probe_rejects_ungated_bookkeeping_and_passes_the_seeds(sandbox, cfg, tmp_path):
    """The claims seed with the fraction-of-tests test.sh it had: the reference with every claim given
    the first claim's decision earns 0.5 there (closed, untouched and the ledger pay as much as the
    decisions): tool_calling.blanket_rewarded. The seeds as they are: no reason."""
    import shutil

    from aes.domains.tool_calling.probes import Blanket, blanket_reasons

    runner = TrialRunner(cfg.sandbox, sandbox)
    ungated = tmp_path / "ungated"
    shutil.copytree(SEEDS / "claims-adjudication", ungated)
    (ungated / "tests" / "test.sh").write_text(UNGATED)
    found = {}
    for name, path in (("ungated", ungated), ("claims", SEEDS / "claims-adjudication"),
                       ("coldchain", SEEDS / "coldchain-disposition")):
        task = load_task(path)
        build = sandbox.build(task)
        assert build.image, build.reason
        trial = runner.run(task, Blanket(), build.image)
        assert trial.agent_info.get("wrapped") and trial.agent_info.get("rewritten"), (name, trial.agent_info)
        found[name] = (trial.reward, [r.code for r in blanket_reasons(trial)])
    print(found)
    assert found["ungated"][0] >= 0.5 and found["ungated"][1] == ["tool_calling.blanket_rewarded"]
    assert found["claims"][1] == [] and found["coldchain"][1] == [], found
