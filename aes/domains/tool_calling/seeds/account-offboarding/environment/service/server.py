"""The staff directory service, as an MCP server over stdio (its state: state.db beside it)."""
import json
import os
import sqlite3
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mcpserver import Server, ToolError  # noqa: E402

DB = os.path.join(HERE, "state.db")
server = Server("directory", instructions="Staff directory: accounts, group memberships, support tickets, the "
                                          "offboarding policy and the audit ledger.")


def db():
    con = sqlite3.connect(DB)
    con.row_factory = sqlite3.Row
    return con


def user(con, user_id, writable=False):
    row = con.execute("SELECT * FROM users WHERE id = ?", (user_id,)).fetchone()
    if row is None:
        raise ToolError("no user %s" % user_id)
    if writable and row["status"] != "active":
        raise ToolError("account %s is %s and cannot be changed" % (user_id, row["status"]))
    return dict(row)


def write(action, target, detail, fn):
    con = db()
    try:
        with con:
            result = fn(con)
            con.execute("INSERT INTO audit (action, target, detail) VALUES (?, ?, ?)", (action, target, detail))
    finally:
        con.close()
    return result


@server.tool("The offboarding policy: the steps to take when an employee leaves.")
def get_offboarding_policy():
    with db() as con:
        return json.loads(con.execute("SELECT body FROM policy").fetchone()["body"])


@server.tool("Accounts whose name contains the query (case-insensitive).", {"query": {"type": "string"}},
             required=["query"])
def find_users(query):
    with db() as con:
        rows = con.execute("SELECT id, name, department, status FROM users WHERE lower(name) LIKE ? ORDER BY id",
                           ("%" + query.lower() + "%",)).fetchall()
    return {"users": [dict(r) for r in rows]}


@server.tool("One account: name, department, manager, status.", {"user_id": {"type": "string"}},
             required=["user_id"])
def get_user(user_id):
    with db() as con:
        return user(con, user_id)


@server.tool("The groups an account belongs to.", {"user_id": {"type": "string"}}, required=["user_id"])
def list_memberships(user_id):
    with db() as con:
        user(con, user_id)
        return {"user_id": user_id, "groups": [r["grp"] for r in con.execute(
            "SELECT grp FROM memberships WHERE user_id = ? ORDER BY grp", (user_id,))]}


@server.tool("Remove an active account from a group.", {"user_id": {"type": "string"}, "group": {"type": "string"}},
             required=["user_id", "group"])
def remove_membership(user_id, group):
    def fn(con):
        user(con, user_id, writable=True)
        if con.execute("DELETE FROM memberships WHERE user_id = ? AND grp = ?", (user_id, group)).rowcount == 0:
            raise ToolError("%s is not in group %s" % (user_id, group))
        return {"user_id": user_id, "removed": group}
    return write("remove_membership", user_id, group, fn)


@server.tool("Add an active account to a group.", {"user_id": {"type": "string"}, "group": {"type": "string"}},
             required=["user_id", "group"])
def add_membership(user_id, group):
    def fn(con):
        user(con, user_id, writable=True)
        if con.execute("SELECT 1 FROM memberships WHERE user_id = ? AND grp = ?", (user_id, group)).fetchone():
            raise ToolError("%s is already in group %s" % (user_id, group))
        con.execute("INSERT INTO memberships VALUES (?, ?)", (user_id, group))
        return {"user_id": user_id, "added": group}
    return write("add_membership", user_id, group, fn)


@server.tool("Tickets owned by an account (any status).", {"owner_id": {"type": "string"}}, required=["owner_id"])
def list_tickets(owner_id):
    with db() as con:
        return {"tickets": [dict(r) for r in con.execute("SELECT * FROM tickets WHERE owner_id = ? ORDER BY id",
                                                         (owner_id,))]}


@server.tool("Give a ticket to another (active) owner.", {"ticket_id": {"type": "string"},
                                                          "new_owner_id": {"type": "string"}},
             required=["ticket_id", "new_owner_id"])
def reassign_ticket(ticket_id, new_owner_id):
    def fn(con):
        row = con.execute("SELECT * FROM tickets WHERE id = ?", (ticket_id,)).fetchone()
        if row is None:
            raise ToolError("no ticket %s" % ticket_id)
        user(con, new_owner_id, writable=True)
        con.execute("UPDATE tickets SET owner_id = ? WHERE id = ?", (new_owner_id, ticket_id))
        return {"ticket_id": ticket_id, "owner_id": new_owner_id}
    return write("reassign_ticket", ticket_id, new_owner_id, fn)


@server.tool("Disable an active account, with a reason.", {"user_id": {"type": "string"}, "reason": {"type": "string"}},
             required=["user_id", "reason"])
def disable_user(user_id, reason):
    def fn(con):
        user(con, user_id, writable=True)
        con.execute("UPDATE users SET status = 'disabled', status_reason = ? WHERE id = ?", (reason, user_id))
        return {"user_id": user_id, "status": "disabled"}
    return write("disable_user", user_id, reason, fn)


@server.tool("The audit ledger: every write, oldest first.")
def get_audit_log():
    with db() as con:
        return {"entries": [dict(r) for r in con.execute("SELECT * FROM audit ORDER BY seq")]}


if __name__ == "__main__":
    server.serve()
