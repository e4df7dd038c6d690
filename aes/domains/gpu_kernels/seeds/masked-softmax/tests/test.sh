#!/bin/bash
# Runs the tests and writes /logs/verifier/reward.json. On a GPU the kernels run as compiled Triton
# and test_timing's kernel/eager times and their ratio (time_ratio) join the reward as extra keys;
# without one they run in Triton's interpreter on the CPU (TRITON_INTERPRET=1), the timing is
# skipped, never credited, and reward.json holds the reward alone (what Harbor's runner expects);
# /logs/verifier/timing.json says which (timing_skipped = 1 or the times). The gate
# (test_gate_*) earns nothing itself: if it fails the reward is 0. Otherwise each section earns its
# weight (WEIGHTS in test_outputs.py) times the share of its tests (test_<section>_*) that pass.
cd /tests
export PYTHONDONTWRITEBYTECODE=1
rm -f /logs/verifier/extra.json
if python3 -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  unset TRITON_INTERPRET
  echo "gpu: $(python3 -c 'import torch; print(torch.cuda.get_device_name(0))')"
else
  export TRITON_INTERPRET=1
  echo "gpu: none (Triton interpreter on the CPU; timing skipped)"
fi
python3 -m pytest -q -rs -p no:cacheprovider --junitxml=/logs/verifier/junit.xml test_outputs.py
python3 - <<'PY'
import ast
import json
import os
import re
import xml.etree.ElementTree as ET

extra = {}
try:
    weights = ast.literal_eval(re.search(r"^WEIGHTS = (\{.*?\})$", open("test_outputs.py").read(), re.M | re.S).group(1))
    cases = {}
    for case in ET.parse("/logs/verifier/junit.xml").getroot().iter("testcase"):
        cases[case.get("name")] = not any(child.tag in ("failure", "error", "skipped") for child in case)
    gates = [ok for name, ok in cases.items() if name.startswith("test_gate_")]
    reward = 0.0
    if gates and all(gates):
        for section, weight in weights.items():
            results = [ok for name, ok in cases.items() if name.startswith(f"test_{section}_")]
            reward += weight * sum(results) / len(results) if results else 0.0
    if os.path.exists("/logs/verifier/extra.json"):
        extra = {k: float(v) for k, v in json.load(open("/logs/verifier/extra.json")).items()}
        json.dump(extra, open("/logs/verifier/timing.json", "w"))
except Exception as exc:
    print(f"no reward: {exc!r}")
    reward = 0.0
timed = extra if extra.get("timing_skipped") == 0 else {}
json.dump({"reward": round(reward, 4), **timed}, open("/logs/verifier/reward.json", "w"))
print(f"reward {reward:.4f} {extra}")
PY
