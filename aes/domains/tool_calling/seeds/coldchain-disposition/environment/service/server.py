"""The cold-chain consignment service, as an MCP server over stdio (its state: state.db beside it)."""
import json
import os
import sqlite3
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mcpserver import Server, ToolError  # noqa: E402

DB = os.path.join(HERE, "state.db")
DECISIONS = ["release", "hold", "reject"]
REASONS = ["WITHIN_LIMITS", "SENSOR_FAULTS", "CRITICAL_BREACH", "EXCURSION_LIMIT"]

server = Server("coldchain", instructions=(
    "Cold-chain consignment service: policy lookup, consignment and shipment queries, temperature "
    "readings, disposition writes, consignment closure and the audit ledger. Every write is recorded "
    "in the audit ledger."))


def db():
    con = sqlite3.connect(DB)
    con.row_factory = sqlite3.Row
    return con


def shipment_row(con, shipment_id):
    row = con.execute("SELECT * FROM shipments WHERE id = ?", (shipment_id,)).fetchone()
    if row is None:
        raise ToolError("no shipment %s" % shipment_id)
    return row


def audit(con, action, target, detail):
    con.execute("INSERT INTO audit (action, target, detail) VALUES (?, ?, ?)", (action, target, detail))


@server.tool("The cold-chain disposition policy in force: its parameters and its ordered rules.")
def get_policy():
    with db() as con:
        return json.loads(con.execute("SELECT body FROM policy").fetchone()["body"])


@server.tool("List consignments (optionally only open or closed ones).",
             {"status": {"type": "string", "enum": ["open", "closed"]}})
def list_consignments(status=None):
    with db() as con:
        rows = con.execute("SELECT c.id, c.customer, c.status, COUNT(s.id) AS shipments FROM consignments c "
                           "LEFT JOIN shipments s ON s.consignment_id = c.id GROUP BY c.id ORDER BY c.id").fetchall()
    return {"consignments": [{"consignment_id": r["id"], "customer": r["customer"], "status": r["status"],
                              "shipment_count": r["shipments"]} for r in rows if status in (None, r["status"])]}


@server.tool("One consignment: its customer, status and the ids of its shipments.",
             {"consignment_id": {"type": "string"}}, required=["consignment_id"])
def get_consignment(consignment_id):
    with db() as con:
        row = con.execute("SELECT * FROM consignments WHERE id = ?", (consignment_id,)).fetchone()
        if row is None:
            raise ToolError("no consignment %s" % consignment_id)
        ships = [r["id"] for r in con.execute("SELECT id FROM shipments WHERE consignment_id = ? ORDER BY id",
                                              (consignment_id,))]
    return {"consignment_id": row["id"], "customer": row["customer"], "status": row["status"], "shipments": ships}


@server.tool("One shipment: product, reading interval (minutes) and its disposition, if any.",
             {"shipment_id": {"type": "string"}}, required=["shipment_id"])
def get_shipment(shipment_id):
    with db() as con:
        row = shipment_row(con, shipment_id)
    return {"shipment_id": row["id"], "consignment_id": row["consignment_id"], "product": row["product"],
            "interval_minutes": row["interval_minutes"], "disposition": row["disposition"], "reason": row["reason"]}


@server.tool("The temperature log of one shipment: readings in order, each with temp_c and a flag (null or "
             "SENSOR_FAULT).", {"shipment_id": {"type": "string"}}, required=["shipment_id"])
def get_readings(shipment_id):
    with db() as con:
        row = shipment_row(con, shipment_id)
        readings = [{"seq": r["seq"], "temp_c": r["temp_c"], "flag": r["flag"]} for r in
                    con.execute("SELECT * FROM readings WHERE shipment_id = ? ORDER BY seq", (shipment_id,))]
    return {"shipment_id": shipment_id, "interval_minutes": row["interval_minutes"], "readings": readings}


@server.tool("Record the disposition of one shipment of an open consignment (replaces an earlier one).",
             {"shipment_id": {"type": "string"}, "decision": {"type": "string", "enum": DECISIONS},
              "reason": {"type": "string", "enum": REASONS}}, required=["shipment_id", "decision", "reason"])
def set_disposition(shipment_id, decision, reason):
    con = db()
    try:
        with con:
            row = shipment_row(con, shipment_id)
            status = con.execute("SELECT status FROM consignments WHERE id = ?", (row["consignment_id"],)).fetchone()
            if status["status"] != "open":
                raise ToolError("consignment %s is closed: its shipments cannot change" % row["consignment_id"])
            con.execute("UPDATE shipments SET disposition = ?, reason = ? WHERE id = ?", (decision, reason, shipment_id))
            audit(con, "set_disposition", shipment_id, "%s %s" % (decision, reason))
    finally:
        con.close()
    return {"shipment_id": shipment_id, "disposition": decision, "reason": reason}


@server.tool("Close (seal) a consignment once every one of its shipments has a disposition.",
             {"consignment_id": {"type": "string"}}, required=["consignment_id"])
def close_consignment(consignment_id):
    con = db()
    try:
        with con:
            row = con.execute("SELECT * FROM consignments WHERE id = ?", (consignment_id,)).fetchone()
            if row is None:
                raise ToolError("no consignment %s" % consignment_id)
            if row["status"] != "open":
                raise ToolError("consignment %s is already closed" % consignment_id)
            missing = [r["id"] for r in con.execute("SELECT id FROM shipments WHERE consignment_id = ? AND "
                                                    "disposition IS NULL ORDER BY id", (consignment_id,))]
            if missing:
                raise ToolError("shipments without a disposition: %s" % ", ".join(missing))
            con.execute("UPDATE consignments SET status = 'closed' WHERE id = ?", (consignment_id,))
            audit(con, "close_consignment", consignment_id, "closed")
    finally:
        con.close()
    return {"consignment_id": consignment_id, "status": "closed"}


@server.tool("The audit ledger: every write, oldest first (optionally only entries after since_seq).",
             {"since_seq": {"type": "integer"}})
def get_audit_log(since_seq=0):
    with db() as con:
        rows = con.execute("SELECT * FROM audit WHERE seq > ? ORDER BY seq", (since_seq,)).fetchall()
    return {"entries": [dict(r) for r in rows]}


if __name__ == "__main__":
    server.serve()
