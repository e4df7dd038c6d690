"""Harbor's own runner gives every seed of App. C's domains 1.0 for the reference and exactly 0 for doing nothing.

The seeds of App. C's domains (every ``conf/domain/<name>.yaml`` with ``nop_zero: true``: ``tool_calling``,
``swe``, ``professional``, ...; aes/domains/<name>/seeds) are plain
Harbor tasks: a tool-calling task declares its service's MCP server (``[[environment.mcp_servers]]``,
Harbor's own format), a software-engineering task carries a repository and a reference patch, a
professional task read-only inputs and deliverables. This module checks, with Harbor itself
(``launchers/install_harbor.sh``, in a side venv, as in tests/test_harbor_compat.py), that Harbor's
``oracle`` agent scores exactly 1.0 on each seed and its ``nop`` agent exactly 0.0 (paper App. C.1;
``nop_zero: true`` in each domain's conf/domain/<name>.yaml).

Harbor runs on copies made by :func:`aes.sandbox.harbor_copy.harbor_copy` (aes's local substitute
for an unpullable ``FROM`` image, ``network_mode`` set to public because Harbor's no-network sidecar
image cannot be pulled here). All seeds run in one Harbor job.

Settings as in tests/test_harbor_compat.py: ``AES_HARBOR_HOME``, ``AES_HARBOR_CONCURRENCY``
(default 8), ``AES_HARBOR_TIMEOUT`` (seconds for the whole job, default 1800).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from aes.sandbox.harbor_copy import harbor_copy
from aes.tasks import load_task
from tests.test_harbor_compat import HarborJob, harbor_env

pytestmark = [pytest.mark.compat, pytest.mark.docker]

REPO = Path(__file__).resolve().parents[1]
DOMAINS = tuple(sorted(p.stem for p in (REPO / "conf" / "domain").glob("*.yaml") if "\nnop_zero: true" in p.read_text()))
"""App. C's domains: those whose config demands that doing nothing earns exactly 0. ``AES_COMPAT_DOMAINS``
(comma-separated) narrows the Harbor job to some of them."""
if os.environ.get("AES_COMPAT_DOMAINS"):
    DOMAINS = tuple(d for d in DOMAINS if d in os.environ["AES_COMPAT_DOMAINS"].split(","))
SEEDS = {f"{domain}/{toml.parent.name}": toml.parent for domain in DOMAINS
         for toml in sorted((REPO / "aes" / "domains" / domain / "seeds").glob("*/task.toml"))}
AGENTS = {"oracle": 1.0, "nop": 0.0}


@pytest.fixture(scope="module")
def domain_image_builder(cfg):
    """aes's image builder; skips when the Docker engine cannot be reached (unless CI requires it)."""
    from aes.sandbox import SandboxUnavailable
    from aes.sandbox.images import ImageBuilder

    try:
        return ImageBuilder(cfg.sandbox)
    except SandboxUnavailable as exc:
        if os.environ.get("AES_REQUIRE_DOCKER") == "1":
            raise
        pytest.skip(f"Docker engine unreachable, Harbor compatibility not checked: {exc}")


@pytest.fixture(scope="module")
def domain_harbor_job(domain_image_builder, tmp_path_factory):
    """Harbor's oracle and nop on a copy of every seed of these domains, all in one job (a copy is
    named ``<domain>--<seed>``: Harbor names trials by their task's folder)."""
    env = harbor_env()
    root = tmp_path_factory.mktemp("harbor-domains")
    copies = root / "tasks"
    copies.mkdir()
    errors: dict[str, str] = {}
    for key, seed in SEEDS.items():
        copy = copies / _copy_name(key)
        try:
            # aes builds each image first, one at a time: Harbor's classic-builder build of the same
            # Dockerfile (install_harbor.sh sets DOCKER_BUILDKIT=0) then reuses every layer, and no two
            # of Harbor's concurrent trials install the domain's base packages side by side
            domain_image_builder.build(load_task(seed))
            harbor_copy(seed, copy, domain_image_builder)
        except (RuntimeError, OSError, ValueError) as exc:  # that task's test reports it
            shutil.rmtree(copy, ignore_errors=True)
            errors[key] = str(exc)
    n_trials = len(AGENTS) * (len(SEEDS) - len(errors))
    if n_trials == 0:
        pytest.fail(f"no task copy could be prepared for Harbor: {errors}", pytrace=False)
    config = root / "job.json"
    config.write_text(json.dumps({"agents": [{"name": agent} for agent in AGENTS]}))
    concurrency = int(os.environ.get("AES_HARBOR_CONCURRENCY", "8"))
    log = root / "harbor.log"
    command = [env["HARBOR_BIN"], "run", "-c", str(config), "-p", str(copies),
               "-n", str(max(1, min(concurrency, n_trials))), "-o", str(root / "jobs"),
               "--job-name", "domain-compat", "-y", "-q"]
    with open(log, "w") as out:
        proc = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    job = HarborJob(proc=proc, jobs_dir=root / "jobs", log=log,
                    timeout=float(os.environ.get("AES_HARBOR_TIMEOUT", "1800")), prepare_errors=errors)
    yield job
    job.stop()


def _copy_name(key: str) -> str:
    return key.replace("/", "--")


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_domain_has_four_seeds(domain):
    assert sum(key.startswith(f"{domain}/") for key in SEEDS) >= 4, f"expected at least 4 seeds in aes/domains/{domain}/seeds"


def test_tool_calling_seeds_declare_their_mcp_servers():
    for key, seed in SEEDS.items():
        if key.startswith("tool_calling/"):
            assert "[[environment.mcp_servers]]" in (seed / "task.toml").read_text(), key


@pytest.mark.parametrize("task", sorted(SEEDS))
def test_harbor_oracle_scores_one_and_nop_zero(task, domain_harbor_job):
    if task in domain_harbor_job.prepare_errors:
        pytest.fail(domain_harbor_job.prepare_errors[task], pytrace=False)
    trials = {t.agent: t for t in domain_harbor_job.trials() if t.task == _copy_name(task)}
    problems = []
    for agent, expected in AGENTS.items():
        trial = trials.get(agent)
        if trial is None:
            problems.append(f"{agent}: Harbor wrote no trial; harbor output:\n{domain_harbor_job.output_tail()}")
        elif trial.exception is not None or trial.rewards is None:
            problems.append(f"{agent}: Harbor's trial failed ({trial.exception or 'no verifier_result'}; "
                            f"see {trial.path})")
        elif {k: float(v) for k, v in trial.rewards.items()} != {"reward": expected}:
            problems.append(f"{agent}: Harbor rewards {trial.rewards}, expected {{'reward': {expected}}} "
                            f"(trial: {trial.path})")
    assert not problems, f"{task}:\n" + "\n".join(problems)
