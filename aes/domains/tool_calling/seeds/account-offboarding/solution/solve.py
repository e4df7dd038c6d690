"""Reference: offboard Dana Whitfield by the directory's offboarding policy, through its MCP tools."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_call import Session  # noqa: E402

with Session(["sudo", "-n", "/usr/local/bin/directory-mcp"]) as mcp:
    print(mcp.call("get_offboarding_policy"))
    [leaver] = [u for u in mcp.call("find_users", {"query": "Dana Whitfield"})["users"] if u["name"] == "Dana Whitfield"]
    manager = mcp.call("get_user", {"user_id": leaver["id"]})["manager_id"]
    for ticket in mcp.call("list_tickets", {"owner_id": leaver["id"]})["tickets"]:
        if ticket["status"] != "closed":
            mcp.call("reassign_ticket", {"ticket_id": ticket["id"], "new_owner_id": manager})
    for group in mcp.call("list_memberships", {"user_id": leaver["id"]})["groups"]:
        mcp.call("remove_membership", {"user_id": leaver["id"], "group": group})
    mcp.call("add_membership", {"user_id": leaver["id"], "group": "alumni"})
    print(mcp.call("disable_user", {"user_id": leaver["id"], "reason": "offboarded"}))
