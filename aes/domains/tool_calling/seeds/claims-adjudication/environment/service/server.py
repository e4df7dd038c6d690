"""The insurance claims service, as an MCP server over stdio (its state: state.db beside it)."""
import json
import os
import sqlite3
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mcpserver import Server, ToolError  # noqa: E402

DB = os.path.join(HERE, "state.db")
DECISIONS = ["approve", "deny", "refer"]
REASONS = ["COVERED", "LIMIT_CAPPED", "LIMIT_EXHAUSTED", "NOT_IN_FORCE", "NOT_COVERED", "LATE_REPORT",
           "MANUAL_REVIEW", "BELOW_DEDUCTIBLE"]

server = Server("claims", instructions=(
    "Insurance claims service: the adjudication guide, policies with their plan's coverage, claim batches, "
    "claim histories, claim decisions, batch closure and the audit ledger. Amounts are integer cents, dates "
    "ISO (YYYY-MM-DD). Every write is recorded in the audit ledger."))


def db():
    con = sqlite3.connect(DB)
    con.row_factory = sqlite3.Row
    return con


def claim_dict(row):
    return {"claim_id": row["id"], "batch_id": row["batch_id"], "policy_id": row["policy_id"],
            "category": row["category"], "incident_date": row["incident_date"],
            "reported_date": row["reported_date"], "amount_cents": row["amount_cents"],
            "decision": row["decision"], "reason": row["reason"], "payout_cents": row["payout_cents"]}


def claim_row(con, claim_id):
    row = con.execute("SELECT * FROM claims WHERE id = ?", (claim_id,)).fetchone()
    if row is None:
        raise ToolError("no claim %s" % claim_id)
    return row


def batch_row(con, batch_id):
    row = con.execute("SELECT * FROM batches WHERE id = ?", (batch_id,)).fetchone()
    if row is None:
        raise ToolError("no batch %s" % batch_id)
    return row


def audit(con, action, target, detail):
    con.execute("INSERT INTO audit (action, target, detail) VALUES (?, ?, ?)", (action, target, detail))


@server.tool("The claims adjudication guide in force: its parameters and its ordered rules.")
def get_adjudication_guide():
    with db() as con:
        return json.loads(con.execute("SELECT body FROM guide").fetchone()["body"])


@server.tool("List claim batches (optionally only open or closed ones) with their claim counts.",
             {"status": {"type": "string", "enum": ["open", "closed"]}})
def list_batches(status=None):
    with db() as con:
        rows = con.execute("SELECT b.id, b.status, COUNT(c.id) AS n FROM batches b LEFT JOIN claims c "
                           "ON c.batch_id = b.id GROUP BY b.id ORDER BY b.id").fetchall()
    return {"batches": [{"batch_id": r["id"], "status": r["status"], "claim_count": r["n"]}
                        for r in rows if status in (None, r["status"])]}


@server.tool("One batch: its status and its claims in claim id order (each with its policy, category, dates, "
             "amount and decision, if any).", {"batch_id": {"type": "string"}}, required=["batch_id"])
def get_batch(batch_id):
    with db() as con:
        row = batch_row(con, batch_id)
        claims = [claim_dict(r) for r in con.execute("SELECT * FROM claims WHERE batch_id = ? ORDER BY id",
                                                     (batch_id,))]
    return {"batch_id": row["id"], "status": row["status"], "claims": claims}


@server.tool("One claim: policy, category, incident and report dates, amount and decision, if any.",
             {"claim_id": {"type": "string"}}, required=["claim_id"])
def get_claim(claim_id):
    with db() as con:
        return claim_dict(claim_row(con, claim_id))


@server.tool("One insurance policy: holder, plan, start and end dates, cancellation date (null if not cancelled), "
             "deductible, and the plan's coverage (annual limit in cents per covered category).",
             {"policy_id": {"type": "string"}}, required=["policy_id"])
def get_policy(policy_id):
    with db() as con:
        row = con.execute("SELECT * FROM policies WHERE id = ?", (policy_id,)).fetchone()
        if row is None:
            raise ToolError("no policy %s" % policy_id)
        coverage = {r["category"]: r["annual_limit_cents"] for r in
                    con.execute("SELECT * FROM plans WHERE plan = ? ORDER BY category", (row["plan"],))}
    return {"policy_id": row["id"], "holder": row["holder"], "plan": row["plan"], "start_date": row["start_date"],
            "end_date": row["end_date"], "cancelled_on": row["cancelled_on"],
            "deductible_cents": row["deductible_cents"], "coverage": coverage}


@server.tool("The decided claims of one policy, from every batch (the current one included), in claim id order.",
             {"policy_id": {"type": "string"}}, required=["policy_id"])
def get_claim_history(policy_id):
    with db() as con:
        if con.execute("SELECT 1 FROM policies WHERE id = ?", (policy_id,)).fetchone() is None:
            raise ToolError("no policy %s" % policy_id)
        rows = con.execute("SELECT * FROM claims WHERE policy_id = ? AND decision IS NOT NULL ORDER BY id",
                           (policy_id,)).fetchall()
    return {"policy_id": policy_id, "claims": [claim_dict(r) for r in rows]}


@server.tool("Record the decision on one claim of an open batch (replaces an earlier one). payout_cents must be 0 "
             "unless the decision is approve.",
             {"claim_id": {"type": "string"}, "decision": {"type": "string", "enum": DECISIONS},
              "reason": {"type": "string", "enum": REASONS}, "payout_cents": {"type": "integer"}},
             required=["claim_id", "decision", "reason", "payout_cents"])
def adjudicate_claim(claim_id, decision, reason, payout_cents):
    if payout_cents < 0 or (decision != "approve" and payout_cents != 0):
        raise ToolError("payout_cents must be 0 for a %s decision and never negative" % decision)
    con = db()
    try:
        with con:
            row = claim_row(con, claim_id)
            if batch_row(con, row["batch_id"])["status"] != "open":
                raise ToolError("batch %s is closed: its claims cannot change" % row["batch_id"])
            con.execute("UPDATE claims SET decision = ?, reason = ?, payout_cents = ? WHERE id = ?",
                        (decision, reason, payout_cents, claim_id))
            audit(con, "adjudicate_claim", claim_id, "%s %s %d" % (decision, reason, payout_cents))
    finally:
        con.close()
    return {"claim_id": claim_id, "decision": decision, "reason": reason, "payout_cents": payout_cents}


@server.tool("Close a batch once every one of its claims has a decision.",
             {"batch_id": {"type": "string"}}, required=["batch_id"])
def close_batch(batch_id):
    con = db()
    try:
        with con:
            if batch_row(con, batch_id)["status"] != "open":
                raise ToolError("batch %s is already closed" % batch_id)
            missing = [r["id"] for r in con.execute("SELECT id FROM claims WHERE batch_id = ? AND decision IS NULL "
                                                    "ORDER BY id", (batch_id,))]
            if missing:
                raise ToolError("claims without a decision: %s" % ", ".join(missing))
            con.execute("UPDATE batches SET status = 'closed' WHERE id = ?", (batch_id,))
            audit(con, "close_batch", batch_id, "closed")
    finally:
        con.close()
    return {"batch_id": batch_id, "status": "closed"}


@server.tool("The audit ledger: every write, oldest first (optionally only entries after since_seq).",
             {"since_seq": {"type": "integer"}})
def get_audit_log(since_seq=0):
    with db() as con:
        rows = con.execute("SELECT * FROM audit WHERE seq > ? ORDER BY seq", (since_seq,)).fetchall()
    return {"entries": [dict(r) for r in rows]}


if __name__ == "__main__":
    server.serve()
