"""Reliability figures, in one run: attacks held, agent-broken attempts scored 0, infrastructure
failures never scored, the tamper audit's cost per trial, its false positives on honest trials and
what it catches alone, a 200k-entry carry, peak aes memory with a 1 GiB tests/ file, storage
overrun stopped, host services reachable from a build or trial (must be none), kill -9
recoveries, a 32-trial load and leaked containers.

    python benchmarks/reliability.py [--kills 10] [--trials 32] [--carry-entries 200000] [--restart-engine]

``--restart-engine`` also restarts this host's dockerd while trials are in flight (only where
aes owns the engine).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aes.config import compose_config  # noqa: E402
from aes.pool import PoolStore  # noqa: E402
from aes.rollout.runner import attach_result  # noqa: E402
from aes.sandbox import OracleAgent, Outcome, TrialRunner  # noqa: E402
from aes.sandbox.docker_client import _owner_alive  # noqa: E402
from aes.sandbox.faults import restart_drill  # noqa: E402
from aes.sandbox.network import host_isolated  # noqa: E402
from aes.sandbox.selftest import ATTACKS, AttackAgent, attack_task, held, task_for  # noqa: E402
from aes.sandbox.selftest_loaders import LOADER_ATTACKS  # noqa: E402
from aes.sandbox.trial import AGENT_BROKE, INFRASTRUCTURE  # noqa: E402
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
MEMORY_PROBE = textwrap.dedent("""
    import resource, sys
    sys.path.insert(0, {repo!r})
    from aes.admission import Validator
    from aes.config import compose_config
    report = Validator(compose_config([]).sandbox).validate({task!r})
    print(report.valid, [r.code for r in report.reasons])
    # VmHWM: this process's own peak (ru_maxrss would carry over the parent's size at fork)
    print("PEAK", next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")))
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


def load(runner: TrialRunner, n: int, tmp: Path) -> tuple[int, float, list]:
    tasks = [load_task(attack_task(tmp / "load", f"t{i}", "seq 1 300000; echo 42 > /app/answer.txt\n"))
             for i in range(n)]
    image = runner.sandbox.build(tasks[0]).image
    with ThreadPoolExecutor(n) as pool:
        results = list(pool.map(lambda t: runner.run(t, OracleAgent(), image), tasks))
    return sum(r.reward == 1.0 for r in results), _peak_mib(), results


def _peak_mib() -> float:
    """This process's peak resident memory so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def honest_twins(runner: TrialRunner, tmp: Path) -> list:
    """Each task variant of the catalogue solved honestly by the agent (must earn 1, the audit silent)."""
    variants: dict = {}
    for attack in ATTACKS.values():
        variants.setdefault((attack.dockerfile, attack.test_sh), attack)
    with ThreadPoolExecutor(3) as pool:
        return list(pool.map(lambda a: runner.run(load_task(task_for(tmp, a, honest=True)), AttackAgent(a, honest=True)),
                             variants.values()))


def audit_alone(runner: TrialRunner, tmp: Path) -> list:
    """The loader attacks with the seal's defences against them off (a carry that keeps only the
    runtime and the verifier's paths, git configs and /etc/passwd as written, relative PATH
    entries): what the tamper audit catches by itself."""
    from aes.sandbox import accounts, gitconfig, seal, verifier

    saved = (seal.SealPolicy.deny_reason, gitconfig.sanitize, accounts.merge_passwd, verifier.absolute_path)
    seal.SealPolicy.deny_reason = lambda self, path, is_dir=None: next(
        (root for root in (*seal.OWN_ROOTS, *seal.SYSTEM_ROOTS) if seal._under("/" + path.lstrip("/"), root)), None)
    gitconfig.sanitize = lambda text: (text, [])
    accounts.merge_passwd = lambda pristine, agent, safe: (agent, [])
    verifier.absolute_path = lambda value: value
    try:
        fresh = TrialRunner(runner.cfg, runner.sandbox)  # no facts kept from the sealed runs
        with ThreadPoolExecutor(3) as pool:
            return list(pool.map(lambda a: (a, fresh.run(load_task(task_for(tmp, a)), AttackAgent(a))),
                                 LOADER_ATTACKS))
    finally:
        seal.SealPolicy.deny_reason, gitconfig.sanitize, accounts.merge_passwd, verifier.absolute_path = saved


def big_carry(runner: TrialRunner, n: int, tmp: Path) -> list[tuple[str, str, float, str]]:
    """An agent that leaves ``n`` files: (carry path, outcome, seconds from the end of its turn to
    the verdict, detail), through the overlay layer and through the engine's API."""
    solve = (f"mkdir -p /app/many && cd /app/many && python3 -c 'import os\nfor i in range({n}): "
             f"open(\"f%d\" % i, \"w\").write(\"x\")'\necho 42 > /app/answer.txt\n")
    path = attack_task(tmp / "big", "big", solve)
    (path / "task.toml").write_text((path / "task.toml").read_text().replace("timeout_sec = 60", "timeout_sec = 1800"))
    out = []
    for way in ("overlay", "engine API"):
        import aes.sandbox.verifier as verifier

        layer = verifier.host_layer
        if way == "engine API":
            verifier.host_layer = _verifier_only
        try:
            result = runner.run(load_task(path), OracleAgent())
        finally:
            verifier.host_layer = layer
        out.append((way, result.outcome.value, result.timings.get("verify", 0.0), result.detail[:160]))
    return out


def _verifier_only(container):
    from aes.sandbox.carry import host_layer

    return host_layer(container) if container.container.labels.get("aes.role") == "verifier" else None


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def scored(result) -> float | None:
    """The reward a solver attempt with this trial result gets in the rollout record."""
    return attach_result(result, "bench", "bench", 0)["extra"]["reward"]


def agent_broken(runner: TrialRunner, tmp: Path) -> list[tuple[str, str, float | None]]:
    """Attempts that break their own sandbox or verifier, and the score each gets."""
    cases = {
        "stopped its container": ("kill -TERM 1; sleep 5\n", ""),
        "filled its disk past storage_mb": (
            "for i in $(seq 40); do head -c 10000000 /dev/zero > /app/b$i; sleep 0.1; done\n",
            '[environment]\nstorage_mb = 64\nnetwork_mode = "no-network"\n'),
        "left a FIFO where the tests read": ("rm -f /app/answer.txt; mkfifo /app/answer.txt\n",
                                             '[verifier]\ntimeout_sec = 5\n'),
    }
    out = []
    for name, (solve, toml) in cases.items():
        path = attack_task(tmp / "broken", name.replace(" ", "-"), solve)
        if toml:
            (path / "task.toml").write_text(f'[task]\nname = "bench/broken"\n{toml}')
        result = runner.run(load_task(path), OracleAgent())
        out.append((name, result.outcome.value, scored(result)))
    return out


def infrastructure(runner: TrialRunner, tmp: Path) -> list[tuple[str, str, float | None]]:
    """Attempts lost to the infrastructure, and the score each gets (None: never scored)."""
    from aes.config import AgentConfig, ModelConfig
    from aes.models import build_model
    from aes.agents import TerminalAgent

    port = _closed_port()
    model = build_model(ModelConfig(name="dead", backend="openai_compatible", model="m", max_retries=0,
                                    base_url=f"http://127.0.0.1:{port}/v1", timeout_sec=5))
    task = load_task(attack_task(tmp / "infra", "infra", "echo 42 > /app/answer.txt\n"))
    out = []
    result = runner.run(task, TerminalAgent(model, AgentConfig(max_turns=2)))
    out.append(("model server unreachable", result.outcome.value, scored(result)))
    result = runner.run(task, OracleAgent(), "aes-env:no-such-image-left-in-the-cache")
    out.append(("image gone from the engine", result.outcome.value, scored(result)))
    return out


def _closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def memory_with_huge_tests(tmp: Path) -> tuple[float, str]:
    """Peak RSS (MiB) of a fresh aes process validating a task with a 1 GiB sparse tests/ file."""
    path = attack_task(tmp / "huge", "huge", "echo 42 > /app/answer.txt\n")
    with open(path / "tests" / "blob.bin", "wb") as fh:
        fh.truncate(1 << 30)
    proc = subprocess.run([sys.executable, "-c", MEMORY_PROBE.format(repo=str(REPO), task=str(path))],
                          capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    peak = next((int(line.split()[1]) for line in lines if line.startswith("PEAK")), 0)
    return peak / 1024, (lines[0] if lines else proc.stderr[-300:])


def storage_overrun(runner: TrialRunner, tmp: Path) -> bool:
    path = attack_task(tmp / "disk", "disk", "head -c 2000000000 /dev/zero > /app/blob; echo 42 > /app/answer.txt\n")
    (path / "task.toml").write_text('[task]\nname = "bench/disk"\n[environment]\nstorage_mb = 100\n'
                                    'network_mode = "no-network"\n')
    result = runner.run(load_task(path), OracleAgent())
    return result.outcome is Outcome.STORAGE_EXCEEDED and scored(result) == 0.0


def host_reachability(runner: TrialRunner, tmp: Path) -> tuple[int, int]:
    """(host address:port pairs reachable, probed) from a public trial and from a build."""
    server = socket.socket()
    server.bind(("0.0.0.0", 0))
    server.listen(16)
    port = server.getsockname()[1]
    stop = threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except OSError:
                pass

    threading.Thread(target=serve, daemon=True).start()
    net = runner.sandbox.client.networks.get(runner.sandbox.network).attrs
    addresses = {c["Gateway"] for c in net["IPAM"]["Config"] if c.get("Gateway")}
    lines = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True).stdout
    addresses |= {line.split()[3].split("/")[0] for line in lines.splitlines() if " lo " not in line}
    targets = ", ".join(f"('{a}', {port})" for a in sorted(addresses))
    probe = (f"python3 -c \"import socket; print('REACHED', len([t for t in [{targets}] "
             "if not socket.socket().connect_ex(t)]))\"")
    path = attack_task(tmp / "net", "net", probe + "\n")
    (path / "task.toml").write_text('[task]\nname = "bench/net"\n[environment]\nnetwork_mode = "public"\n')
    trial = runner.run(load_task(path), OracleAgent())
    found = re.search(r"REACHED (\d+)", trial.agent_output)
    reached = int(found.group(1)) if found else len(addresses)
    (path / "environment" / "Dockerfile").write_text(
        f"FROM python:3.12-slim\nRUN {probe} | tee /reach.txt && grep -qx 'REACHED 0' /reach.txt\n")
    build = runner.sandbox.build(load_task(path))
    stop.set()
    server.close()
    return reached + (0 if build.image else len(addresses)), 2 * len(addresses)


def api_carry_attacks(runner: TrialRunner, tmp: Path) -> list:
    """The catalogue again with the agent's changes read through the engine's API (as on remote or
    rootless engines, or for a container the freezer could not stop)."""
    import aes.sandbox.verifier as verifier

    layer, verifier.host_layer = verifier.host_layer, _verifier_only  # the audit still watches the verifier
    try:
        with ThreadPoolExecutor(3) as pool:
            return list(pool.map(lambda a: (a, runner.run(load_task(task_for(tmp, a)), AttackAgent(a))),
                                 ATTACKS.values()))
    finally:
        verifier.host_layer = layer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--carry-entries", type=int, default=200_000, help="files an agent leaves (0: skip)")
    parser.add_argument("--restart-engine", action="store_true", help="restart dockerd mid-trial too")
    args = parser.parse_args()
    cfg = compose_config([])
    runner = TrialRunner(cfg.sandbox)
    with tempfile.TemporaryDirectory(prefix="aes-reliability-") as tmp_name:
        tmp = Path(tmp_name)
        with ThreadPoolExecutor(3) as pool:
            attacks = list(pool.map(lambda a: (a, runner.run(load_task(task_for(tmp / "attacks", a)), AttackAgent(a))),
                                    ATTACKS.values()))
        through_api = api_carry_attacks(runner, tmp / "attacks-api")
        honest = honest_twins(runner, tmp / "honest")
        alone = audit_alone(runner, tmp / "alone")
        broken = agent_broken(runner, tmp)
        infra = infrastructure(runner, tmp)
        peak_huge, huge_verdict = memory_with_huge_tests(tmp)
        stopped = storage_overrun(runner, tmp)
        reached, probed = host_reachability(runner, tmp)
        injected, recovered = kills(args.kills, tmp)
        finished, peak, loaded = load(runner, args.trials, tmp)
        big = big_carry(runner, args.carry_entries, tmp) if args.carry_entries else []  # last: it grows the process
        restarted = restart_drill(runner, tmp / "restart") if args.restart_engine else []
    runner.sandbox.drain()
    managed = runner.sandbox.client.api.containers(all=True, filters={"label": "aes.managed=true"})
    leaked = [c for c in managed if c["Labels"].get("aes.pid") == str(os.getpid())]
    orphans = [c for c in managed if c["Labels"].get("aes.pid") != str(os.getpid()) and not _owner_alive(c["Labels"])]
    held_n = sum(held(r) for _, r in attacks)
    broken_attacks = [(a.name, r.outcome.value, scored(r)) for a, r in attacks if r.outcome in AGENT_BROKE]
    broken_all = broken + broken_attacks
    print("\nreliability")
    print(f"  attacks on the verifier: {held_n}/{len(attacks)} held")
    for a, r in attacks:
        print(f"    {'held  ' if held(r) else 'BROKEN'} {a.weakness:<15} {a.name:<34} reward={r.reward} ({r.outcome.value})")
    print(f"  the same, changes read through the engine's API: {sum(held(r) for _, r in through_api)}/"
          f"{len(through_api)} held")
    for a, r in through_api:
        if not held(r):
            print(f"    BROKEN {a.weakness:<15} {a.name:<34} reward={r.reward} ({r.outcome.value})")
    verified = [r for r in [*(r for _, r in attacks), *(r for _, r in through_api), *honest, *loaded]
                if r.agent_info.get("audit")]
    audited = [r for r in verified if r.agent_info["audit"]["watched"]]
    seconds = [r.agent_info["audit"]["seconds"] for r in audited]
    print(f"  tamper audit: watched {len(audited)}/{len(verified)} verifications; cost per trial median "
          f"{_quantile(seconds, 0.5):.3f} s, p90 {_quantile(seconds, 0.9):.3f} s, max {max(seconds, default=0):.3f} s "
          f"(target: median < 0.2 s)")
    false = [r for r in [*honest, *loaded] if r.outcome is Outcome.TAMPERED or r.reward != 1.0]
    print(f"  honest trials (each task variant solved by the agent, and the {args.trials}-trial load): "
          f"{len(honest) + len(loaded) - len(false)}/{len(honest) + len(loaded)} earned 1, "
          f"{sum(r.outcome is Outcome.TAMPERED for r in [*honest, *loaded])} ended tampered (must be 0)")
    caught = sum(r.outcome is Outcome.TAMPERED and (r.agent_info.get("audit") or {}).get("tests_reward") == 1.0
                 for _, r in alone)
    print(f"  the audit alone (the seal's defences of classes 1-4 off): {caught}/{len(alone)} loader attacks got "
          "through the seal (the tests wrote 1) and ended tampered")
    for r in [*honest, *loaded]:
        if r.outcome is Outcome.TAMPERED or r.reward != 1.0:
            print(f"    honest trial {r.task}: reward={r.reward} ({r.outcome.value}: {r.detail[:160]})")
    for a, r in alone:
        if r.outcome is not Outcome.TAMPERED:
            print(f"    not caught: {a.name:<34} reward={r.reward} ({r.outcome.value})")
    for way, outcome, secs, detail in big:
        print(f"  an agent leaving {args.carry_entries} files, carried through the {way}: {outcome} in {secs:.0f} s "
              f"from the end of its turn ({detail or 'carried'})")
    if big:
        print(f"  peak memory of the aes process after those carries: {_peak_mib():.0f} MiB")
    zero = sum(s == 0.0 for _, _, s in broken_all)
    print(f"  agent-broken attempts scored 0: {zero}/{len(broken_all)}")
    for name, outcome, score in broken_all:
        print(f"    {name:<40} {outcome:<18} scored {score}")
    never = sum(s is None and o in {x.value for x in INFRASTRUCTURE} for _, o, s in infra)
    print(f"  infrastructure failures never scored: {never}/{len(infra)}")
    for name, outcome, score in infra:
        print(f"    {name:<40} {outcome:<18} scored {score}")
    print(f"  peak aes memory validating a task with a 1 GiB tests/ file: {peak_huge:.0f} MiB "
          f"(target < 300; verdict {huge_verdict})")
    print(f"  storage overrun stopped: {'yes' if stopped else 'NO'}")
    print(f"  host services reachable from a build or trial: {reached} of {probed} probes "
          f"(must be 0; host firewall {'on' if host_isolated(cfg.sandbox) else 'OFF'})")
    print(f"  kill -9 of a pool writer: {injected} injected, {recovered} recovered with nothing lost or duplicated")
    print(f"  {args.trials} concurrent trials: {finished} finished with the right reward")
    print(f"  peak memory of the aes process: {peak:.0f} MiB")
    if restarted:
        rerun = sum("engine went away" in r.detail for r in restarted)
        rewarded = sum(r.reward == 1.0 for r in restarted)
        print(f"  dockerd restarted mid-trial: {len(restarted)} trials in flight, {rerun} run again, "
              f"{rewarded} with the right reward")
    print(f"  leaked aes containers: {len(leaked)} (and {len(orphans)} left on this engine by other aes processes "
          "that have ended)")


if __name__ == "__main__":
    main()
