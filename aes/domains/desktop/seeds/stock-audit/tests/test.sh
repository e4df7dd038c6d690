#!/bin/bash
# The reward. The substance - every test but test_bookkeeping_* (the edits the task asks for) -
# earns SUBSTANCE once all of its tests pass; while any fails it earns PARTIAL times the share that
# pass, under PARTIAL: a document with one edit of several left out (the header not bold, the date
# not filled) stays under 0.5. The bookkeeping (every other line or cell kept as written) earns
# BOOKKEEPING times its share, and only once every edit is right: a document saved with one edit
# made earns nothing for the lines it left alone. Written to /logs/verifier/reward.txt.
cd /tests
/opt/desktop-tests/bin/python -m pytest -q -p no:cacheprovider --junitxml=/logs/verifier/junit.xml test_outputs.py
/opt/desktop-tests/bin/python - <<'PY'
import xml.etree.ElementTree as ET
SUBSTANCE, PARTIAL, BOOKKEEPING = 0.8, 0.4, 0.2
try:
    cases = {case.get("name"): not any(child.tag in ("failure", "error", "skipped") for child in case)
             for case in ET.parse("/logs/verifier/junit.xml").getroot().iter("testcase")}
    decisions = [ok for name, ok in cases.items() if not name.startswith("test_bookkeeping_")]
    books = [ok for name, ok in cases.items() if name.startswith("test_bookkeeping_")]
    done = bool(decisions) and all(decisions)
    earned = SUBSTANCE if done else PARTIAL * sum(decisions) / len(decisions) if decisions else 0.0
    if books and done:
        earned += BOOKKEEPING * sum(books) / len(books)
    reward = earned / (SUBSTANCE + (BOOKKEEPING if books else 0.0))
except Exception:
    reward = 0.0
open("/logs/verifier/reward.txt", "w").write(f"{reward:.4f}\n")
print(f"reward {reward:.4f}")
PY
