#!/bin/bash
# Runs the tests and writes the reward to /logs/verifier/reward.txt. The gate tests (test_gate_*:
# every deliverable present, the inputs untouched) earn nothing themselves: if one fails the reward
# is 0. Otherwise each section earns its weight (WEIGHTS in test_outputs.py) times the share of its
# tests (test_<section>_*) that pass; a section listed in LIVE (the workbook's values) earns only
# while every test named *recalculates* passes (the workbook computes them from its inputs).
cd /tests
python3 -m pytest -q -p no:cacheprovider --junitxml=/logs/verifier/junit.xml test_outputs.py
python3 - <<'PY'
import ast
import re
import xml.etree.ElementTree as ET

try:
    weights = ast.literal_eval(re.search(r"^WEIGHTS = (\{.*?\})$", open("test_outputs.py").read(), re.M | re.S).group(1))
    cases = {}
    for case in ET.parse("/logs/verifier/junit.xml").getroot().iter("testcase"):
        cases[case.get("name")] = not any(child.tag in ("failure", "error", "skipped") for child in case)
    live = ast.literal_eval(re.search(r"^LIVE = (\[.*?\])$", open("test_outputs.py").read(), re.M | re.S).group(1))
    gates = [ok for name, ok in cases.items() if name.startswith("test_gate_")]
    model = [ok for name, ok in cases.items() if "recalculates" in name]
    reward = 0.0
    if gates and all(gates):
        for section, weight in weights.items():
            results = [ok for name, ok in cases.items() if name.startswith(f"test_{section}_")]
            if section in live and not (model and all(model)):
                results = [False] * len(results)  # values the workbook does not compute earn nothing
            reward += weight * sum(results) / len(results) if results else 0.0
except Exception as exc:
    print(f"no reward: {exc!r}")
    reward = 0.0
open("/logs/verifier/reward.txt", "w").write(f"{reward:.4f}\n")
print(f"reward {reward:.4f}")
PY
