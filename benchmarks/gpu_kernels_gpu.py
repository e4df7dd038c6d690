"""The gpu_kernels seeds' own verifiers on a machine with an NVIDIA GPU, outside Docker: for each seed,
its reference kernel, the reference's eager code as the solution (eager-only), and the stub it ships
(nop); on masked-softmax also eager math beside a kernel that only copies its result (copy-kernel,
tests/test_domain_gpu_kernels.py's COPY_KERNEL). Prints each reward, the kernel and eager times and
their ratio (paper App. C.3: a kernel is credited for time within 70% of eager, 60% for an aggregate
limit), and fails unless the reference earns 1.0 within its limit and every wrong solution earns
under 0.5 and nothing earns without a correct result.

Needs Python with torch, triton, numpy and pytest (the GPU machine's image has them) and root: the
verifier runs as it runs in a trial, from /tests, with the solution in /app, and its untrusted child
as uid 64999. Writes the figures to ``--out`` (JSON) as it goes.

    python3 benchmarks/gpu_kernels_gpu.py --out results.json [--seeds masked-softmax,...]
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO / "aes" / "domains" / "gpu_kernels" / "seeds"
EAGER_MAX = 0.5


def _copy_kernel() -> str:
    """COPY_KERNEL from the Docker test, read without importing aes."""
    tree = ast.parse((REPO / "tests" / "test_domain_gpu_kernels.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "COPY_KERNEL":
            return ast.literal_eval(node.value)
    raise SystemExit("COPY_KERNEL not found in tests/test_domain_gpu_kernels.py")


def variants(seed: Path) -> dict[str, str]:
    reference = (seed / "environment" / "reference.py").read_text()
    out = {"reference": (seed / "solution" / "solution.py").read_text(),
           "eager-only": reference.replace("class Model(", "class ModelNew("),
           "nop": (seed / "environment" / "solution.py").read_text()}
    if seed.name == "masked-softmax":
        out["copy-kernel"] = _copy_kernel()
    return out


def verify(seed: Path, solution: str, timeout: float) -> tuple[dict, str, float]:
    """The seed's tests/test.sh as a trial runs it: /tests, /app (reference.py and the solution), /logs/verifier."""
    for path in ("/app", "/tests", "/logs/verifier"):
        shutil.rmtree(path, ignore_errors=True)
    shutil.copytree(seed / "tests", "/tests")
    Path("/app").mkdir()
    shutil.copy(seed / "environment" / "reference.py", "/app/reference.py")
    Path("/app/solution.py").write_text(solution)
    Path("/logs/verifier").mkdir(parents=True)
    start = time.monotonic()
    try:
        proc = subprocess.run(["bash", "/tests/test.sh"], capture_output=True, text=True, timeout=timeout, cwd="/")
        output = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        output = f"timed out after {timeout} s\n{exc.stdout or ''}"
    took = time.monotonic() - start
    reward_file = Path("/logs/verifier/reward.json")
    reward = json.loads(reward_file.read_text()) if reward_file.is_file() else {}
    return reward, output, took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--seeds", default="", help="comma-separated seed names (default: every seed)")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    seeds = sorted(p.parent for p in SEEDS.glob("*/task.toml"))
    if args.seeds:
        seeds = [s for s in seeds if s.name in args.seeds.split(",")]
    results, problems = [], []
    for seed in seeds:
        for name, solution in variants(seed).items():
            reward, output, took = verify(seed, solution, args.timeout)
            value = reward.get("reward")
            row = {"seed": seed.name, "solution": name, "reward": value, "seconds": round(took, 1),
                   **{k: reward[k] for k in ("eager_ms", "kernel_ms", "time_ratio", "max_ratio") if k in reward}}
            gpu = next((line for line in output.splitlines() if line.startswith("gpu:")), "gpu: ?")
            row["gpu"] = gpu[5:]
            results.append(row)
            ratio = f" ratio {row['time_ratio']:.3f} (limit {row.get('max_ratio')})" if "time_ratio" in row else ""
            print(f"{seed.name:26s} {name:12s} reward {value} {took:6.1f} s{ratio}  [{row['gpu']}]", flush=True)
            if name == "reference" and (value != 1.0 or "time_ratio" not in row):
                problems.append(f"{seed.name}: the reference earned {value} ({reward}); output ends:\n{output[-2500:]}")
            if name != "reference" and (value is None or value >= EAGER_MAX):
                problems.append(f"{seed.name}/{name}: earned {value}; output ends:\n{output[-2500:]}")
            if name == "nop" and value != 0.0:
                problems.append(f"{seed.name}/nop: earned {value}")
            if args.out:
                args.out.write_text(json.dumps(results, indent=1))
    for problem in problems:
        print("PROBLEM:", problem, file=sys.stderr)
    print(f"{len(results)} verifications, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
