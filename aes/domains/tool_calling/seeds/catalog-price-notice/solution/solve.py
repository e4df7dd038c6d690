"""Reference: apply price notice PN-31 to the active products through the catalog's MCP tools."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_call import Session  # noqa: E402

NOTICE = "PN-31"
with Session(["sudo", "-n", "/usr/local/bin/catalog-mcp"]) as mcp:
    for line in mcp.call("get_notice", {"notice_id": NOTICE})["lines"]:
        if mcp.call("get_product", {"sku": line["sku"]})["status"] != "active":
            print("skip", line["sku"])
            continue
        mcp.call("update_price", {"sku": line["sku"], "price_cents": line["new_price_cents"], "reason": NOTICE})
        print("updated", line["sku"], line["new_price_cents"])
    print(mcp.call("mark_notice_applied", {"notice_id": NOTICE}))
