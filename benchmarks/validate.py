"""How long aes takes to validate a task, next to Harbor's own runner and a bare Docker trial.

    python benchmarks/validate.py [--tasks DIR] [--repeat N] [--harbor-repeat M]
                                  [--no-harbor] [--json OUT]

For each task (a task dir, or every task dir under DIR; default: the terminal seeds):

* aes cold: the task's ``aes-env`` image is removed first (the tag aes validated with, and
  any image labelled ``aes.image.task=<task name>``), then one validation builds it again. Layers
  that other images on the engine still hold (e.g. Harbor's, built from the same
  Dockerfile) stay in Docker's cache; the table says how many build steps came from it;
* aes warm: N validations on the cached image; median per stage: build (cache lookup),
  then for the oracle and the nop trial (they run side by side) start, solve (agent phase),
  verify, teardown; total is the wall time of one ``Validator.validate``;
* Harbor: the wall time of ``harbor run -p COPY -a oracle`` plus ``harbor run -p COPY -a nop``
  (median of --harbor-repeat pairs, after one oracle run that builds the image; Harbor
  removes its image after every trial, so later runs rebuild from Docker's layer cache). COPY is the
  task with its ``FROM`` rebased to aes's local substitute and ``network_mode = "public"``,
  as in tests/test_harbor_compat.py (neither the public base image nor Harbor's
  egress-control probe image can be pulled here). Harbor is installed (or reused) with
  launchers/install_harbor.sh;
* the ratio aes warm / Harbor (target: <= 0.2, median over tasks);
* aes's own overhead per trial: the trial's wall time (start, agent phase, verification,
  teardown) minus the time spent in solve.sh and in tests/test.sh (target: < 1 s);
* the floor: a bare Docker trial through the docker SDK (start aes-base with
  ``sleep infinity``, two execs, read a file with get_archive, remove with force), median.

Figures depend on the machine's load; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # runs from a checkout, installed or not

import docker.errors

from aes.admission import ValidationReport, Validator
from aes.config import compose_config
from aes.sandbox.docker_client import LABEL_IMAGE_TASK, LABEL_TASK, connect
from aes.sandbox.harbor_copy import harbor_copy
from aes.sandbox.images import IMAGE_REPO, ImageBuilder
from aes.tasks import find_tasks, load_task

SEEDS = REPO / "aes" / "domains" / "terminal" / "seeds"
INSTALLER = REPO / "launchers" / "install_harbor.sh"
TARGET_RATIO = 0.2
TARGET_OVERHEAD = 1.0
TRIAL_STAGES = (("start", "start"), ("solve", "agent"), ("verify", "verify"), ("tests", "tests"),
                ("teardown", "teardown"))


def median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


# -- aes -------------------------------------------------------------------------------------
def remove_task_images(client, task_name: str, tags: set[str]) -> list[str]:
    """Remove the aes-env images of a task: the given tags and those labelled with its name."""
    found = set(tags)
    for label in (LABEL_IMAGE_TASK, LABEL_TASK):  # images built before aes.image.task had aes.task
        for image in client.images.list(filters={"label": f"{label}={task_name[:200]}"}):
            found.update(t for t in image.tags if t.startswith(f"{IMAGE_REPO}:"))
    removed = []
    for tag in sorted(found):
        try:
            client.images.remove(tag, force=True)
            removed.append(tag)
        except docker.errors.ImageNotFound:
            pass
    return removed


class InvalidTask(Exception):
    """aes rejects the task, so there is nothing to time."""


def validate(validator: Validator, path: Path) -> ValidationReport:
    report = validator.validate(path)
    if not report.valid:
        raise InvalidTask("; ".join(map(str, report.reasons)))
    return report


class BuildLog:
    """Keeps the last BuildResult of a sandbox, to tell how cold a cold build was."""

    def __init__(self, sandbox):
        self.last = None
        self._build = sandbox.build
        sandbox.build = self  # this instance only; aes's code is unchanged

    def __call__(self, task):
        self.last = self._build(task)
        return self.last

    def cache_hits(self) -> str:
        """'k/n' steps taken from Docker's layer cache in the last build (classic builder)."""
        log = self.last.log_tail if self.last else ""
        steps = len(re.findall(r"^Step \d+/\d+ :", log, re.MULTILINE))
        return "image cached" if self.last and self.last.cached else f"{log.count('Using cache')}/{steps}"


def bench_aes(validator: Validator, builds: BuildLog, client, path: Path, repeat: int) -> dict:
    name = load_task(path).name
    first = validate(validator, path)  # learn the image tag (and that the task is valid)
    removed = remove_task_images(client, name, {first.oracle.image} if first.oracle else set())
    cold = validate(validator, path)
    cold_cache = builds.cache_hits()
    warm = [validate(validator, path) for _ in range(repeat)]
    figures = {"name": name, "removed_images": removed, "cold_cache_hits": cold_cache,
               "oracle_reward": cold.oracle_reward, "nop_reward": cold.nop_reward,
               "cold": {"build": cold.timings.get("build"), "total": cold.seconds},
               "warm": {"build": median([r.timings.get("build") for r in warm]),
                        "total": median([r.seconds for r in warm])}}
    for trial in ("oracle", "nop"):
        for label, key in TRIAL_STAGES:
            figures["cold"][f"{trial}.{label}"] = cold.timings.get(f"{trial}.{key}")
            figures["warm"][f"{trial}.{label}"] = median([r.timings.get(f"{trial}.{key}") for r in warm])
        figures["warm"][f"{trial}.overhead"] = median([overhead(r.timings, trial) for r in warm])
    return figures


def overhead(timings: dict[str, float], trial: str) -> float | None:
    """A trial's wall time minus what solve.sh and test.sh themselves took."""
    parts = [timings.get(f"{trial}.{k}") for k in ("start", "agent", "verify", "teardown")]
    if any(p is None for p in parts):
        return None
    return sum(parts) - (timings.get(f"{trial}.agent") or 0.0) - (timings.get(f"{trial}.tests") or 0.0)


# -- Harbor ----------------------------------------------------------------------------------
def harbor_env() -> dict[str, str]:
    proc = subprocess.run(["bash", str(INSTALLER)], check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{INSTALLER} failed:\n{proc.stderr[-3000:]}")
    dumped = subprocess.run(["bash", "-c", 'set -a; eval "$1"; env -0', "_", proc.stdout],
                            capture_output=True, text=True, check=True).stdout
    return dict(item.split("=", 1) for item in dumped.split("\0") if "=" in item)





def harbor_trial(env: dict[str, str], task: Path, agent: str, jobs: Path) -> tuple[float, float | None]:
    """Wall seconds of one `harbor run` and the reward its trial recorded."""
    job = f"{agent}-{time.monotonic_ns()}"
    start = time.monotonic()
    proc = subprocess.run([env["HARBOR_BIN"], "run", "-p", str(task), "-a", agent, "-o", str(jobs),
                           "--job-name", job, "-y", "-q"], check=False, env=env, cwd=jobs,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"harbor run -a {agent} on {task} exited {proc.returncode}:\n"
                         f"{(proc.stdout + proc.stderr)[-3000:]}")
    results = list((jobs / job).glob("*/result.json"))
    if len(results) != 1:
        raise SystemExit(f"harbor run -a {agent} on {task}: expected one trial, found {results}")
    data = json.loads(results[0].read_text())
    if data.get("exception_info"):  # e.g. a do-nothing run whose verifier times out: no reward
        info = data["exception_info"]
        print(f"   (Harbor's {agent} trial on {task.name}: {info.get('exception_type')}, no reward)")
    return seconds, ((data.get("verifier_result") or {}).get("rewards") or {}).get("reward")


def bench_harbor(env: dict[str, str], builder: ImageBuilder, path: Path, repeat: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="aes-bench-harbor-") as tmp:
        copy, jobs = Path(tmp) / path.name, Path(tmp) / "jobs"
        jobs.mkdir()
        harbor_copy(path, copy, builder)
        warmup, _ = harbor_trial(env, copy, "oracle", jobs)
        oracle, nop, rewards = [], [], {}
        for _ in range(repeat):
            seconds, rewards["oracle"] = harbor_trial(env, copy, "oracle", jobs)
            oracle.append(seconds)
            seconds, rewards["nop"] = harbor_trial(env, copy, "nop", jobs)
            nop.append(seconds)
    return {"warmup": warmup, "oracle": median(oracle), "nop": median(nop),
            "sum": median([a + b for a, b in zip(oracle, nop)]),
            "oracle_reward": rewards["oracle"], "nop_reward": rewards["nop"]}


# -- the floor -------------------------------------------------------------------------------
def bench_floor(client, image: str, repeat: int) -> float:
    """Median seconds of a bare trial: run, two execs, get_archive, remove."""
    times = []
    for _ in range(repeat):
        start = time.monotonic()
        container = client.containers.run(image, ["sleep", "infinity"], detach=True,
                                          network_mode="none", labels={"aes.bench": "floor"})
        try:
            container.exec_run(["sh", "-c", "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt"])
            container.exec_run(["true"])
            stream, _ = container.get_archive("/logs/verifier/reward.txt")
            b"".join(stream)
        finally:
            container.remove(force=True)
        times.append(time.monotonic() - start)
    return statistics.median(times)


# -- report ----------------------------------------------------------------------------------
def fmt(value: float | None) -> str:
    return f"{value:8.2f}" if isinstance(value, (int, float)) else f"{'-':>8}"


def print_task(path: Path, aes: dict, harbor: dict | None, repeat: int, harbor_repeat: int) -> None:
    print(f"\n== {path.name} ({aes['name']})  rewards aes oracle={aes['oracle_reward']} "
          f"nop={aes['nop_reward']}"
          + (f", Harbor oracle={harbor['oracle_reward']} nop={harbor['nop_reward']}" if harbor else ""))
    print(f"   removed for the cold run: {', '.join(aes['removed_images']) or 'nothing'}; "
          f"cold build steps from Docker's layer cache: {aes['cold_cache_hits']}")
    print(f"   {'aes stage (s)':<24}{'cold':>8}{'warm':>8}   (warm = median of {repeat})")
    print(f"   {'build':<24}{fmt(aes['cold']['build'])}{fmt(aes['warm']['build'])}")
    for trial in ("oracle", "nop"):
        for label, _ in TRIAL_STAGES:
            key = f"{trial}.{label}"
            print(f"   {key:<24}{fmt(aes['cold'][key])}{fmt(aes['warm'][key])}")
        print(f"   {trial + ' aes overhead':<24}{'':>8}{fmt(aes['warm'][trial + '.overhead'])}   "
              f"(trial minus solve.sh and test.sh; target < {TARGET_OVERHEAD:g} s)")
    print(f"   {'total (validate wall)':<24}{fmt(aes['cold']['total'])}{fmt(aes['warm']['total'])}")
    if harbor:
        print(f"   {'Harbor (s)':<24}{'':>8}{'warm':>8}   (median of {harbor_repeat}; "
              f"first run, to build: {harbor['warmup']:.2f})")
        for key in ("oracle", "nop", "sum"):
            label = {"oracle": "harbor run -a oracle", "nop": "harbor run -a nop",
                     "sum": "oracle + nop"}[key]
            print(f"   {label:<24}{'':>8}{fmt(harbor[key])}")
        ratio = aes["warm"]["total"] / harbor["sum"]
        print(f"   {'ratio aes warm / Harbor':<24}{'':>8}{ratio:8.3f}   "
              f"(target <= {TARGET_RATIO:.2f}: {'met' if ratio <= TARGET_RATIO else 'MISSED'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=Path, default=SEEDS, help="a task dir or a dir of task dirs")
    parser.add_argument("--repeat", type=int, default=3, help="warm aes validations per task")
    parser.add_argument("--harbor-repeat", type=int, default=1,
                        help="warm `harbor run` pairs per task (each takes ~20 s per agent)")
    parser.add_argument("--floor-repeat", type=int, default=10, help="bare Docker trials")
    parser.add_argument("--no-harbor", action="store_true", help="skip the Harbor runs")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # keep order with aes's warnings on stderr

    paths = find_tasks([args.tasks])
    if not paths:
        raise SystemExit(f"no task directories under {args.tasks}")
    cfg = compose_config([])
    client = connect(cfg.sandbox)
    validator, builder = Validator(cfg.sandbox), ImageBuilder(cfg.sandbox)
    builds = BuildLog(validator.runner.sandbox)
    env = None if args.no_harbor else harbor_env()

    print(f"aes validation benchmark: {len(paths)} task(s), repeat {args.repeat}, "
          f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    floor = bench_floor(client, cfg.sandbox.base_image, args.floor_repeat)
    print(f"floor: bare Docker trial ({cfg.sandbox.base_image}; run, 2 execs, get_archive, "
          f"remove) median of {args.floor_repeat}: {floor:.3f} s")
    results = []
    for path in paths:
        try:
            aes = bench_aes(validator, builds, client, path, args.repeat)
        except InvalidTask as exc:
            print(f"\n== {path.name}: skipped, aes rejects it: {exc}")
            continue
        harbor = bench_harbor(env, builder, path, args.harbor_repeat) if env else None
        print_task(path, aes, harbor, args.repeat, args.harbor_repeat)
        results.append({"task": str(path), "aes": aes, "harbor": harbor})
    if not results:
        raise SystemExit("no valid task to time")

    warm = [r["aes"]["warm"]["total"] for r in results]
    cold = [r["aes"]["cold"]["total"] for r in results]
    over = [r["aes"]["warm"][f"{t}.overhead"] for r in results for t in ("oracle", "nop")
            if r["aes"]["warm"].get(f"{t}.overhead") is not None]
    line = (f"SUMMARY {len(results)} task(s): aes validate median warm {statistics.median(warm):.2f} s, "
            f"cold {statistics.median(cold):.2f} s; aes overhead per trial median {statistics.median(over):.2f} s, "
            f"max {max(over):.2f} s (target < {TARGET_OVERHEAD:g}: "
            f"{'met' if max(over) < TARGET_OVERHEAD else 'MISSED'}); ")
    if env:
        harbor = [r["harbor"]["sum"] for r in results]
        ratio = statistics.median(w / h for w, h in zip(warm, harbor))
        line += (f"Harbor oracle+nop median {statistics.median(harbor):.2f} s; "
                 f"median ratio aes warm / Harbor {ratio:.3f} (target <= {TARGET_RATIO:.2f}: "
                 f"{'met' if ratio <= TARGET_RATIO else 'MISSED'}); ")
    line += (f"floor {floor:.3f} s per bare trial (aes warm = {statistics.median(warm) / floor:.1f}x; "
             f"it runs two trials side by side); load average {os.getloadavg()[0]:.1f}")
    print("\n" + line)
    if args.json:
        args.json.write_text(json.dumps({"floor": floor, "tasks": results, "summary": line}, indent=2))


if __name__ == "__main__":
    main()
