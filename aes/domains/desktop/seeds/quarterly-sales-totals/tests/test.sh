#!/bin/bash
# Runs the tests; the reward is the fraction that pass (written to /logs/verifier/reward.txt).
cd /tests
/opt/desktop-tests/bin/python -m pytest -q -p no:cacheprovider --junitxml=/logs/verifier/junit.xml test_outputs.py
/opt/desktop-tests/bin/python - <<'PY'
import xml.etree.ElementTree as ET
try:
    suite = ET.parse("/logs/verifier/junit.xml").getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    total = int(suite.get("tests"))
    failed = sum(int(suite.get(k, 0)) for k in ("failures", "errors", "skipped"))
    reward = (total - failed) / total if total else 0.0
except Exception:
    reward = 0.0
open("/logs/verifier/reward.txt", "w").write(f"{reward:.4f}\n")
print(f"reward {reward:.4f}")
PY
