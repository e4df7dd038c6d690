#!/bin/bash
# Runs the tests and writes /logs/verifier/reward.json. On a GPU the kernels run as compiled Triton
# and test_timing's kernel/eager times and their ratio (time_ratio) join the reward as extra keys;
# without one they run in Triton's interpreter on the CPU (TRITON_INTERPRET=1), the timing is
# skipped, never credited, and reward.json holds the reward alone (what Harbor's runner expects);
# /logs/verifier/timing.json says which (timing_skipped = 1 or the times). Correctness gates
# everything: unless the gate (test_gate_*) and every test_correct_* pass, the reward is 0. Then each
# section earns its weight (WEIGHTS in test_outputs.py, GPU_WEIGHTS when the timing ran) times the
# share of its tests (test_<section>_*) that pass, but the triton section (the kernel is launched,
# no eager math is seen, and its launches alone compute the output) counts only whole, and the
# timing only once it does. Eager math alone (correct, no kernel that computes it) earns 0.4, or 0.25 on a GPU.
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
    source = open("test_outputs.py").read()
    weights = ast.literal_eval(re.search(r"^WEIGHTS = (\{.*?\})$", source, re.M | re.S).group(1))
    gpu_weights = ast.literal_eval(re.search(r"^GPU_WEIGHTS = (\{.*?\})$", source, re.M | re.S).group(1))
    cases = {}
    for case in ET.parse("/logs/verifier/junit.xml").getroot().iter("testcase"):
        cases[case.get("name")] = not any(child.tag in ("failure", "error", "skipped") for child in case)
    if os.path.exists("/logs/verifier/extra.json"):
        extra = {k: float(v) for k, v in json.load(open("/logs/verifier/extra.json")).items()}
    section = lambda name: [ok for case, ok in cases.items() if case.startswith(f"test_{name}_")]
    gates, correct, triton = section("gate"), section("correct"), section("triton")
    reward = 0.0
    if gates and all(gates) and correct and all(correct):
        chosen = gpu_weights if extra.get("timing_skipped") == 0 else weights
        earned = 0.0
        for name, weight in chosen.items():
            results = section(name)
            if name in ("triton", "timing") and not (triton and all(triton)):
                results = [False] * len(results)  # a kernel that does not compute the output earns nothing
            earned += weight * sum(results) / len(results) if results else 0.0
        reward = earned / sum(chosen.values())
    if extra:
        json.dump(extra, open("/logs/verifier/timing.json", "w"))
except Exception as exc:
    print(f"no reward: {exc!r}")
    reward = 0.0
timed = extra if extra.get("timing_skipped") == 0 else {}
json.dump({"reward": round(reward, 4), **timed}, open("/logs/verifier/reward.json", "w"))
print(f"reward {reward:.4f} {extra}")
PY
