"""From a fresh clone to a finished default run: the README's two main lines, timed phase by phase.

    python benchmarks/first_run.py [--keep] [--json OUT] [--repo URL_OR_DIR] [-- extra overrides...]

Clones the repository (default: this checkout's HEAD) into a new folder, runs
``bash launchers/setup.sh`` there (its own ``.venv``; every ``[aes setup]`` line is timed, so the
table shows what each setup phase took), then ``.venv/bin/python -m aes.run`` in a fresh run dir
(the embedded default), and reads the run's stage times from its round row (as
``benchmarks/round.py`` does). It also says whether the run compiled a DeepSpeed op that setup had
already built (the clone's ``.aes-cache/torch_extensions``: a ``.so`` newer than the run's start is a repeat).

"From nothing" on this machine is not quite from nothing: it says which of the machine-wide things
setup would otherwise install were already present (the Docker engine, the base image, pip's
download cache, chromium), since on a new machine those add their minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aes.report.metrics import read_metrics  # noqa: E402

SETUP_LINE = re.compile(r"\[aes setup\]\S*\s+(.*)")


def _reused() -> dict[str, bool]:
    """Machine-wide things a fresh machine would not have."""
    def ok(cmd: list[str]) -> bool:
        try:
            return subprocess.run(cmd, capture_output=True, timeout=30).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False
    return {"docker engine running": ok(["docker", "info"]),
            "base image aes-base:bookworm": ok(["docker", "image", "inspect", "aes-base:bookworm"]),
            "pip download cache": (Path.home() / ".cache" / "pip").is_dir(),
            "chromium": shutil.which("chromium") is not None,
            }


def timed_setup(clone: Path, env: dict[str, str]) -> tuple[float, list[tuple[str, float]]]:
    """Run setup.sh; the seconds from each ``[aes setup]`` line to the next (the phase it names)."""
    start = time.monotonic()
    phases: list[tuple[str, float]] = []
    last_name, last_t = "start", start
    with open(clone.parent / "setup.log", "w") as log:
        proc = subprocess.Popen(["bash", "launchers/setup.sh"], cwd=clone, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            log.write(line)
            m = SETUP_LINE.search(line)
            if m:
                now = time.monotonic()
                phases.append((last_name, now - last_t))
                last_name, last_t = m.group(1)[:90], now
        proc.wait()
    phases.append((last_name, time.monotonic() - last_t))
    if proc.returncode != 0:
        sys.exit(f"setup.sh exited {proc.returncode}; see {clone.parent / 'setup.log'}")
    return time.monotonic() - start, phases


def compiled_since(root: Path, since: float) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.so") if p.stat().st_mtime > since)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", default=str(REPO), help="what to clone (default: this checkout)")
    parser.add_argument("--keep", action="store_true", help="keep the clone (default: removed at the end)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for the run (after --)")
    args = parser.parse_args()

    reused = _reused()
    work = Path(tempfile.mkdtemp(prefix="aes-first-run-"))
    clone = work / "aes"
    t0 = time.monotonic()
    subprocess.run(["git", "clone", "--quiet", args.repo, str(clone)], check=True)
    clone_s = time.monotonic() - t0
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AES_", "VIRTUAL_ENV"))}
    setup_s, phases = timed_setup(clone, env)

    run_dir = work / "run"
    cmd = [".venv/bin/python", "-m", "aes.run", f"hydra.run.dir={run_dir}", *args.overrides]
    print("running:", " ".join(cmd), flush=True)
    started = time.time()
    t1 = time.monotonic()
    with open(work / "run.log", "w") as log:
        proc = subprocess.run(cmd, cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT)
    run_s = time.monotonic() - t1
    if proc.returncode != 0:
        sys.exit(f"aes.run exited {proc.returncode} after {run_s:.0f} s; see {work / 'run.log'}")
    rounds = [r for r in read_metrics(run_dir / "metrics.jsonl") if r.get("event") == "round"]
    stages = sorted(((k.removeprefix("seconds/"), float(v)) for k, v in (rounds[-1] if rounds else {}).items()
                     if k.startswith("seconds/") and isinstance(v, (int, float))), key=lambda kv: -kv[1])
    repeats = compiled_since(clone / ".aes-cache" / "torch_extensions", started)

    print(f"\nclone: {clone_s:.0f} s")
    print(f"setup: {setup_s:.0f} s")
    for name, seconds in phases:
        if seconds >= 0.5:
            print(f"  {seconds:>6.0f} s  {name}")
    print(f"run:   {run_s:.0f} s (python -m aes.run; model load and start-up included)")
    for name, seconds in stages:
        print(f"  {seconds:>6.0f} s  {name}")
    total = clone_s + setup_s + run_s
    print(f"\nfrom a fresh clone to a finished default run: {total:.0f} s ({total / 60:.1f} min; goal 6 min)")
    print("DeepSpeed ops compiled again by the run: " + (", ".join(repeats) if repeats else "none"))
    print("already on this machine (a new one installs them in setup): "
          + ", ".join(name for name, present in reused.items() if present) or "nothing")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 idle cores read ~0)")
    figures = {"clone_seconds": clone_s, "setup_seconds": setup_s, "setup_phases": phases, "run_seconds": run_s,
               "stages": dict(stages), "total_seconds": total, "ops_compiled_again": repeats, "reused": reused,
               "load_average": os.getloadavg()}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
