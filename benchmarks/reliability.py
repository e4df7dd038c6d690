"""Reliability figures: attacks tried/held, kills injected/recovered, leaked containers,
peak memory of the aes process under load.

    python benchmarks/reliability.py [--kills 10] [--trials 32] [--restart-engine]

``--restart-engine`` also restarts this host's dockerd while trials are in flight (only where
aes owns the engine).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aes.config import compose_config  # noqa: E402
from aes.pool import PoolStore  # noqa: E402
from aes.sandbox import OracleAgent, TrialRunner  # noqa: E402
from aes.sandbox.docker_client import _owner_alive  # noqa: E402
from aes.sandbox.faults import restart_drill  # noqa: E402
from aes.sandbox.selftest import attack_task, run_attacks  # noqa: E402
from aes.tasks import load_task  # noqa: E402

WRITER = textwrap.dedent("""
    import sys, pathlib
    sys.path.insert(0, {repo!r})
    from aes.pool import PoolStore
    pool = PoolStore({pool!r})
    for i in range(100_000):
        env, _ = pool.add(pathlib.Path({src!r}) / f"t{{i % 30}}", name=f"t{{i % 30}}")
        nxt = {{"proposed": "valid", "valid": "calibrated", "calibrated": "admitted"}}.get(env.status)
        if nxt:
            pool.set_status(env.env_id, nxt)
        if env.status == "admitted":
            print(env.env_id, flush=True)
""")


def kills(n: int, tmp: Path) -> tuple[int, int]:
    """kill -9 a pool writer at random points ``n`` times; count recoveries with nothing lost."""
    src = tmp / "src"
    for i in range(30):
        attack_task(src, f"t{i}", f"echo {i}\n")
    root, seen, ok = tmp / "pool", set(), 0
    for _ in range(n):
        proc = subprocess.Popen([sys.executable, "-c", WRITER.format(repo=str(REPO), pool=str(root), src=str(src))],
                                stdout=subprocess.PIPE, text=True)
        time.sleep(random.uniform(0.3, 1.5))
        proc.send_signal(signal.SIGKILL)
        seen |= set(proc.communicate()[0].split("\n")[:-1])  # the kill may tear the last line
        pool = PoolStore(root)
        hashes = [e.content_hash for e in pool.envs()]
        ok += (not pool.check() and seen <= {e.env_id for e in pool.envs("admitted")}
               and len(hashes) == len(set(hashes)))
    return n, ok


def load(runner: TrialRunner, n: int, tmp: Path) -> tuple[int, float]:
    tasks = [load_task(attack_task(tmp / "load", f"t{i}", "seq 1 300000; echo 42 > /app/answer.txt\n"))
             for i in range(n)]
    image = runner.sandbox.build(tasks[0]).image
    with ThreadPoolExecutor(n) as pool:
        rewards = [r.reward for r in pool.map(lambda t: runner.run(t, OracleAgent(), image), tasks)]
    return sum(r == 1.0 for r in rewards), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--restart-engine", action="store_true", help="restart dockerd mid-trial too")
    args = parser.parse_args()
    cfg = compose_config([])
    runner = TrialRunner(cfg.sandbox)
    with tempfile.TemporaryDirectory(prefix="aes-reliability-") as tmp:
        attacks = run_attacks(runner)
        injected, recovered = kills(args.kills, Path(tmp))
        finished, peak = load(runner, args.trials, Path(tmp))
        restarted = restart_drill(runner, Path(tmp) / "restart") if args.restart_engine else []
    leaked = [c for c in runner.sandbox.client.api.containers(all=True, filters={"label": "aes.managed=true"})
              if c["Labels"].get("aes.pid") == str(os.getpid()) or not _owner_alive(c["Labels"])]
    print("\nreliability")
    print(f"  attacks on the verifier: {sum(a.held for a in attacks)}/{len(attacks)} held")
    for a in attacks:
        print(f"    {'held  ' if a.held else 'BROKEN'} {a.attack:<28} reward={a.reward} ({a.outcome})")
    print(f"  kill -9 of a pool writer: {injected} injected, {recovered} recovered with nothing lost or duplicated")
    print(f"  {args.trials} concurrent trials: {finished} finished with the right reward")
    print(f"  peak memory of the aes process: {peak:.0f} MiB")
    if restarted:
        rerun = sum("engine went away" in r.detail for r in restarted)
        rewarded = sum(r.reward == 1.0 for r in restarted)
        print(f"  dockerd restarted mid-trial: {len(restarted)} trials in flight, {rerun} run again, "
              f"{rewarded} with the right reward")
    print(f"  leaked aes containers: {len(leaked)}")


if __name__ == "__main__":
    main()
