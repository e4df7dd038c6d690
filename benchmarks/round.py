"""Where a round of the embedded default run spends its time.

    python benchmarks/round.py [--run-dir DIR] [--json OUT] [-- extra overrides...]

Runs ``python -m aes.run`` (the embedded default: the local GGUF proposer and solver on CPU,
Docker sandbox, one DPPO update) in a fresh run dir, then reads each round's row of
``metrics.jsonl``: the flywheel times every stage it runs (``seconds/<stage>``: parent
rollouts, proposer, reflection, admission, calibration, solver rollouts, update, refresh,
eval). Prints one table per round (stage, seconds, share of the round), the round's wall
time, the whole command's wall time (model load and start-up included) and the load average,
which the figures depend on. ``--run-dir`` reads an existing run instead of starting one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aes.report.metrics import read_metrics  # noqa: E402


def run_default(run_dir: Path, overrides: list[str]) -> float:
    """The README's main command in ``run_dir``; its wall time in seconds."""
    cmd = [sys.executable, "-m", "aes.run", f"hydra.run.dir={run_dir}", *overrides]
    print("running:", " ".join(cmd), flush=True)
    start = time.monotonic()
    with open(run_dir.parent / f"{run_dir.name}.log", "w") as log:
        proc = subprocess.run(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    took = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"aes.run exited {proc.returncode} after {took:.0f} s; see {log.name}")
    return took


def stage_table(row: dict) -> list[tuple[str, float]]:
    return sorted(((k.removeprefix("seconds/"), float(v)) for k, v in row.items()
                   if k.startswith("seconds/") and isinstance(v, (int, float))), key=lambda kv: -kv[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run-dir", type=Path, help="read this run instead of starting one")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for the run (after --)")
    args = parser.parse_args()

    wall = None
    if args.run_dir is None:
        run_dir = Path(tempfile.mkdtemp(prefix="aes-round-")) / "run"
        wall = run_default(run_dir, args.overrides)
    else:
        run_dir = args.run_dir
    metrics = run_dir / "metrics.jsonl"
    if not metrics.is_file():
        sys.exit(f"{metrics} does not exist: not a run dir of python -m aes.run")
    rounds = [r for r in read_metrics(metrics) if r.get("event") == "round"]
    if not rounds:
        sys.exit(f"{metrics} has no round row: the run ended before its first round finished")
    figures = {"run_dir": str(run_dir), "command_seconds": wall, "load_average": os.getloadavg(), "rounds": []}
    for row in rounds:
        stages = stage_table(row)
        total = sum(seconds for _, seconds in stages)
        print(f"\nround {row['round']}: {total:.0f} s in its stages ({total / 60:.1f} min)")
        print(f"  {'stage':<18}{'seconds':>9}{'share':>8}")
        for stage, seconds in stages:
            print(f"  {stage:<18}{seconds:>9.1f}{seconds / total if total else 0:>8.0%}")
        figures["rounds"].append({"round": row["round"], "seconds": dict(stages), "total": total})
    if wall is not None:
        print(f"\nthe whole command: {wall:.0f} s ({wall / 60:.1f} min; model load and start-up included)")
    print(f"load average: {' '.join(f'{x:.2f}' for x in figures['load_average'])} (2 idle cores read ~0)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
