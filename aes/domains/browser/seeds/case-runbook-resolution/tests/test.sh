#!/bin/bash
# The reward. The substance - every test but test_bookkeeping_* (the changes the task asks for) -
# earns SUBSTANCE times the share of its tests that pass. The bookkeeping (a property that was
# already right kept, a change reference cited, the rest untouched, the steps taken) earns
# BOOKKEEPING times its share, and only once all of the substance is right: a form saved with only
# the change reference typed earns nothing for what was already right. Written to
# /logs/verifier/reward.txt.
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
