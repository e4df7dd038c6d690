#!/bin/bash
# The reward. The decisions - every test but test_bookkeeping_* - earn SUBSTANCE times the share of
# them that pass. The bookkeeping (the batch closed, the other records untouched, the audit ledger)
# earns BOOKKEEPING times its share, and only once every decision is right: an attempt that never
# reads the policy, takes one blanket action and closes earns nothing for closing and leaving the
# rest alone. Written to /logs/verifier/reward.txt.
cd /tests
python3 -m pytest -q -p no:cacheprovider --junitxml=/logs/verifier/junit.xml test_outputs.py
python3 - <<'PY'
import xml.etree.ElementTree as ET
SUBSTANCE, BOOKKEEPING = 0.8, 0.2
try:
    cases = {case.get("name"): not any(child.tag in ("failure", "error", "skipped") for child in case)
             for case in ET.parse("/logs/verifier/junit.xml").getroot().iter("testcase")}
    decisions = [ok for name, ok in cases.items() if not name.startswith("test_bookkeeping_")]
    books = [ok for name, ok in cases.items() if name.startswith("test_bookkeeping_")]
    earned = SUBSTANCE * sum(decisions) / len(decisions) if decisions else 0.0
    if books and decisions and all(decisions):
        earned += BOOKKEEPING * sum(books) / len(books)
    reward = earned / (SUBSTANCE + (BOOKKEEPING if books else 0.0))
except Exception:
    reward = 0.0
open("/logs/verifier/reward.txt", "w").write(f"{reward:.4f}\n")
print(f"reward {reward:.4f}")
PY
