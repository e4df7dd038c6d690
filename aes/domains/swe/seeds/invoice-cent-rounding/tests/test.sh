#!/bin/bash
# The reward. Gate: the repository's public tests, as committed (the copy in tests/public, run
# against the agent's package: editing or deleting them in the repository does not open the
# gate), must pass (they fail on the repository as built, so doing nothing earns exactly 0);
# then the fraction of the private tests that pass,
# written to /logs/verifier/reward.txt.
mkdir -p /logs/verifier
if ! (cd /tests/public && PYTHONPATH=/app/repo python3 -m pytest -q -p no:cacheprovider .) > /logs/verifier/public_tests.txt 2>&1; then
  tail -n 30 /logs/verifier/public_tests.txt
  echo "the repository's public tests fail: reward 0"
  echo 0 > /logs/verifier/reward.txt
  exit 0
fi
cd /tests
python3 -m pytest -q -p no:cacheprovider --junitxml=/logs/verifier/junit.xml test_outputs.py
python3 - <<'PY'
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
