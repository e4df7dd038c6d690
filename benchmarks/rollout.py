"""Rollout speed of a solver on this machine: attempts/minute, generated tokens/s, and the
per-turn overhead outside the model (command round trip, parsing, recording).

    python benchmarks/rollout.py [--solver local] [--tasks DIR] [--attempts 4] [--turns 6]

Target: median overhead < 50 ms per turn. The overhead is each turn's wall time minus the
model call; it includes the command's own run time, so the floor is also reported: the
round trip of a no-op command (``true``) through ``docker exec``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aes.config import compose_config  # noqa: E402
from aes.models import build_model  # noqa: E402
from aes.rollout import RolloutRunner  # noqa: E402
from aes.sandbox import TrialRunner  # noqa: E402
from aes.tasks import find_tasks, load_task  # noqa: E402


def exec_floor(runner: TrialRunner, task, n: int = 30) -> float:
    image = runner.sandbox.build(task).image
    with runner.sandbox.start(image, task) as container:
        times = [container.exec("true", 10).seconds for _ in range(n)]
    return statistics.median(times)


def carried_updates(n: int, overrides: list[str]) -> dict[bool, float]:
    """Wall seconds of ``n`` DPPO steps of the embedded run without and with carried rollouts
    (``flywheel.carry_unfinished``), same seed, each in a fresh run dir (no proposer generation:
    only the solver's rollouts and updates, where carrying can matter)."""
    from aes.compose import build_flywheel
    from aes.flywheel import Flywheel
    from aes.proposer.generate import seed_pool

    seconds = {}
    for carry in (False, True):
        cfg = compose_config([*overrides, f"flywheel.carry_unfinished={str(carry).lower()}", "seed=1"])
        with tempfile.TemporaryDirectory(prefix="aes-bench-carry-") as tmp:
            flywheel = Flywheel(build_flywheel(cfg, Path(tmp)))
            try:
                seed_pool(flywheel.stack)
                start = time.monotonic()
                carried = []
                for _ in range(n):
                    flywheel.train_step(0)
                    carried.append(flywheel.carried)
                seconds[carry] = time.monotonic() - start
                print(f"  carry_unfinished={carry}: {n} step(s) in {seconds[carry]:.1f} s "
                      f"(attempts carried into the next update: {carried})")
            finally:
                flywheel.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solver", default="local")
    parser.add_argument("--tasks", default=str(REPO / "aes/domains/terminal/seeds"))
    parser.add_argument("--pattern", default="starter-*", help="glob of task dirs under --tasks")
    parser.add_argument("--attempts", type=int, default=4)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--carried", type=int, default=0, metavar="N",
                        help="also time N DPPO steps of the embedded run without and with carried rollouts")
    args = parser.parse_args()

    cfg = compose_config([f"solver={args.solver}", f"agent.max_turns={args.turns}"])
    tasks = [load_task(p) for p in find_tasks([Path(args.tasks)]) if p.match(args.pattern)]
    trials = TrialRunner(cfg.sandbox)
    solver = build_model(cfg.solver)
    out = Path(tempfile.mkdtemp(prefix="aes-bench-rollout-"))
    runner = RolloutRunner(solver, cfg.agent, trials, out, cfg.sandbox.concurrency)
    start = time.monotonic()
    runner.run(tasks, args.attempts)
    wall = time.monotonic() - start
    solver.close()

    steps, attempts = [], 0
    for path in (out / "trajectories").rglob("[0-9]*.json"):
        attempts += 1
        steps += [s for s in json.loads(path.read_text())["steps"] if s["source"] == "agent"]
    tokens = sum(s["metrics"]["completion_tokens"] for s in steps)
    model_sec = sum(s["extra"]["latency_sec"] for s in steps)
    overheads = [s["extra"]["overhead_sec"] for s in steps if "overhead_sec" in s["extra"]]
    floor = exec_floor(trials, tasks[0])
    rows = [
        ("tasks x attempts", f"{len(tasks)} x {args.attempts} = {attempts}"),
        ("wall time", f"{wall:.1f} s"),
        ("attempts / minute", f"{attempts / wall * 60:.2f}"),
        ("model turns", f"{len(steps)}"),
        ("generated tokens / s (per model call)", f"{tokens / model_sec:.1f}" if model_sec else "-"),
        ("generated tokens / s (wall, all attempts)", f"{tokens / wall:.1f}"),
        ("per-turn overhead outside the model, median", f"{statistics.median(overheads) * 1000:.0f} ms"
         if overheads else "-"),
        ("per-turn overhead, 90th percentile", f"{sorted(overheads)[int(0.9 * (len(overheads) - 1))] * 1000:.0f} ms"
         if overheads else "-"),
        ("floor: docker exec round trip of `true`, median", f"{floor * 1000:.0f} ms"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"\nrollout benchmark: solver={args.solver}, {args.turns} turns max, {len(tasks)} tasks")
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    if overheads:
        verdict = "met" if statistics.median(overheads) < 0.05 else "NOT met"
        print(f"target median overhead < 50 ms per turn: {verdict}")
    if args.carried:
        print(f"\ncarried rollouts: {args.carried} DPPO step(s) of the embedded run, same seed")
        times = carried_updates(args.carried, [f"solver={args.solver}"])
        print(f"  ratio with / without carried rollouts: {times[True] / times[False]:.2f}")


if __name__ == "__main__":
    main()
