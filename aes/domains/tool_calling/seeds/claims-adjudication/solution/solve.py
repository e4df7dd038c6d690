"""Reference: adjudicate every claim of batch B-2611 by the adjudication guide through the claims service's
MCP tools, then close the batch."""
import os
import sys
from datetime import date

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_call import Session  # noqa: E402

BATCH = "B-2611"


def decide(claim, policy, paid, p):
    """(decision, reason, payout) by the guide's rules; ``paid`` = payouts already approved in the same
    policy, category and calendar year."""
    incident, reported = date.fromisoformat(claim["incident_date"]), date.fromisoformat(claim["reported_date"])
    in_force = date.fromisoformat(policy["start_date"]) <= incident <= date.fromisoformat(policy["end_date"])
    if policy["cancelled_on"] and incident >= date.fromisoformat(policy["cancelled_on"]):
        in_force = False
    if not in_force:
        return "deny", "NOT_IN_FORCE", 0
    if claim["category"] not in policy["coverage"]:
        return "deny", "NOT_COVERED", 0
    if (reported - incident).days > p["reporting_window_days"]:
        return "deny", "LATE_REPORT", 0
    if claim["amount_cents"] > p["referral_threshold_cents"]:
        return "refer", "MANUAL_REVIEW", 0
    payable = claim["amount_cents"] - policy["deductible_cents"]
    if payable <= 0:
        return "deny", "BELOW_DEDUCTIBLE", 0
    remaining = policy["coverage"][claim["category"]] - paid
    if payable <= remaining:
        return "approve", "COVERED", payable
    if remaining > 0:
        return "approve", "LIMIT_CAPPED", remaining
    return "deny", "LIMIT_EXHAUSTED", 0


with Session(["sudo", "-n", "/usr/local/bin/claims-mcp"]) as mcp:
    params = mcp.call("get_adjudication_guide")["parameters"]
    for claim in sorted(mcp.call("get_batch", {"batch_id": BATCH})["claims"], key=lambda c: c["claim_id"]):
        policy = mcp.call("get_policy", {"policy_id": claim["policy_id"]})
        history = mcp.call("get_claim_history", {"policy_id": claim["policy_id"]})["claims"]
        paid = sum(h["payout_cents"] for h in history
                   if h["decision"] == "approve" and h["category"] == claim["category"]
                   and h["incident_date"][:4] == claim["incident_date"][:4]
                   and (h["batch_id"] != BATCH or h["claim_id"] < claim["claim_id"]))
        decision, reason, payout = decide(claim, policy, paid, params)
        mcp.call("adjudicate_claim", {"claim_id": claim["claim_id"], "decision": decision, "reason": reason,
                                      "payout_cents": payout})
        print(claim["claim_id"], decision, reason, payout)
    print(mcp.call("close_batch", {"batch_id": BATCH}))
