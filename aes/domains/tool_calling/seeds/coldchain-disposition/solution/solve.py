"""Reference: apply the disposition policy to every shipment of CN-4410 through the service's MCP tools."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_call import Session  # noqa: E402

CONSIGNMENT = "CN-4410"


def decide(readings, interval, p):
    faults = sum(1 for r in readings if r["flag"] == "SENSOR_FAULT")
    temps = [r["temp_c"] for r in readings if r["flag"] != "SENSOR_FAULT"]
    if faults > p["sensor_fault_limit"]:
        return "hold", "SENSOR_FAULTS"
    if any(t > p["critical_temp_c"] for t in temps):
        return "reject", "CRITICAL_BREACH"
    if sum(1 for t in temps if t > p["excursion_temp_c"]) * interval > p["excursion_allowance_min"]:
        return "reject", "EXCURSION_LIMIT"
    return "release", "WITHIN_LIMITS"


with Session(["sudo", "-n", "/usr/local/bin/coldchain-mcp"]) as mcp:
    params = mcp.call("get_policy")["parameters"]
    for shipment in mcp.call("get_consignment", {"consignment_id": CONSIGNMENT})["shipments"]:
        log = mcp.call("get_readings", {"shipment_id": shipment})
        decision, reason = decide(log["readings"], log["interval_minutes"], params)
        mcp.call("set_disposition", {"shipment_id": shipment, "decision": decision, "reason": reason})
        print(shipment, decision, reason)
    print(mcp.call("close_consignment", {"consignment_id": CONSIGNMENT}))
