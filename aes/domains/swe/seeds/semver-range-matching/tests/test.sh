#!/bin/bash
# The reward. Gate: the repository's public tests, as committed (the copy in tests/public, run
# against the agent's package: editing or deleting them in the repository does not open the
# gate), must pass (they fail on the repository as built, so doing nothing earns exactly 0);
# so must the private tests named test_gate_* (the issue's rule on cases the public tests do not
# show, called through the kit, so special-casing the issue's example does not open it; an
# agent's code that ends the public suite with status 0 does not open this one); then the
# fraction of the other private tests that pass, written to /logs/verifier/reward.txt.
# The agent's code never runs as root or inside the process that decides the reward: the gate
# runs as an unprivileged user (tests/untrusted.py), and the private tests call the package in
# a child process as that user and compare the plain values it returns.
mkdir -p /logs/verifier
if ! python3 -I /tests/untrusted.py --copy /tests/public --env PYTHONPATH=/app/repo --timeout 120 -- python3 -m pytest -q -p no:cacheprovider . > /logs/verifier/public_tests.txt 2>&1; then
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
    cases = {case.get("name"): not any(child.tag in ("failure", "error", "skipped") for child in case)
             for case in ET.parse("/logs/verifier/junit.xml").getroot().iter("testcase")}
    gates = [ok for name, ok in cases.items() if name.startswith("test_gate_")]
    parts = [ok for name, ok in cases.items() if not name.startswith("test_gate_")]
    reward = sum(parts) / len(parts) if gates and all(gates) and parts else 0.0
except Exception:
    reward = 0.0
open("/logs/verifier/reward.txt", "w").write(f"{reward:.4f}\n")
print(f"reward {reward:.4f}")
PY
