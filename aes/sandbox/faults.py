"""Fault injection for the fault tests and ``benchmarks/reliability.py``: restart this host's
Docker engine while trials are in flight.

Only for machines where aes owns the engine (CI, a test box): it stops ``dockerd`` with
SIGTERM, as a service manager would, and starts it again with the same command line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from aes.sandbox.docker_client import proc_stat
from aes.sandbox.selftest import attack_task
from aes.sandbox.trial import OracleAgent, TrialResult, TrialRunner
from aes.tasks import load_task


def _named(name: str) -> list[int]:
    """Processes whose command name is ``name``."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == name:
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (an engine this process started earlier) is reaped."""
    fields = proc_stat(pid)
    if not fields:
        return False
    if fields[0] != "Z":
        return True
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    return False


def restart_local_engine(timeout: float = 120) -> float:
    """Restart the one local ``dockerd`` with its command line and log file; the seconds it was
    away. RuntimeError when there is no single local dockerd or it does not come back."""
    import docker

    pids = [pid for pid in _named("dockerd") if _alive(pid)]
    if len(pids) != 1:
        raise RuntimeError(f"expected one local dockerd process to restart, found {len(pids)}")
    pid = pids[0]
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    log_path = os.readlink(f"/proc/{pid}/fd/2")
    start = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    deadline = start + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            raise RuntimeError(f"dockerd (pid {pid}) did not stop within {timeout:.0f} s")
        time.sleep(0.2)
    if not (log_path.startswith("/") and Path(log_path).is_file()):
        log_path = os.devnull
    with open(log_path, "ab") as log:
        subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True, cwd="/")
    while time.monotonic() < deadline:
        try:
            docker.from_env(timeout=5).ping()
            return time.monotonic() - start
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.5)
    raise RuntimeError(f"dockerd did not come back within {timeout:.0f} s of the restart")


def restart_drill(runner: TrialRunner, root: Path, trials: int = 3, after: float = 4.0) -> list[TrialResult]:
    """Run ``trials`` oracle trials (each sleeps 8 s, then does the work) at once and restart
    the engine ``after`` seconds in; their results, which should all be reward 1."""
    tasks = [load_task(attack_task(root, f"restart{i}", "sleep 8; echo 42 > /app/answer.txt\n"))
             for i in range(trials)]
    for task in tasks:
        if not runner.sandbox.build(task).image:  # built first: the restart hits the trials
            raise RuntimeError(f"could not build {task.name}")
    with ThreadPoolExecutor(trials) as pool:
        futures = [pool.submit(runner.run, task, OracleAgent()) for task in tasks]
        time.sleep(after)
        restart_local_engine()
        return [future.result() for future in futures]
