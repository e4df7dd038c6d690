"""Harbor's own runner gives every tool-calling seed 1.0 for the reference and exactly 0 for doing nothing.

A tool-calling task (aes/domains/tool_calling) is a plain Harbor task whose task.toml declares its
service's MCP server (``[[environment.mcp_servers]]``, Harbor's own format) and names a state dump
and the allowed changes under ``[metadata]``. Its reference reaches the seeded service only through
that server (``sudo -n /usr/local/bin/<svc>-mcp``), and its tests read the service's database as
root. This module checks, with Harbor itself (``launchers/install_harbor.sh``, in a side venv, as in
tests/test_harbor_compat.py), that Harbor's ``oracle`` agent scores exactly 1.0 on each seed and
its ``nop`` agent exactly 0.0 (paper App. C.1; ``nop_zero: true`` in conf/domain/tool_calling.yaml).

Harbor runs on copies made by :func:`aes.sandbox.harbor_copy.harbor_copy` (aes's local substitute
for an unpullable ``FROM`` image, ``network_mode`` set to public because Harbor's no-network sidecar
image cannot be pulled here).

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
from tests.test_harbor_compat import HarborJob, harbor_env

pytestmark = [pytest.mark.compat, pytest.mark.docker]

REPO = Path(__file__).resolve().parents[1]
TC_SEEDS = REPO / "aes" / "domains" / "tool_calling" / "seeds"
TC_SEED_NAMES = sorted(p.name for p in TC_SEEDS.iterdir() if (p / "task.toml").is_file()) if TC_SEEDS.is_dir() else []
TC_AGENTS = {"oracle": 1.0, "nop": 0.0}


@pytest.fixture(scope="module")
def tc_image_builder(cfg):
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
def tc_harbor_job(tc_image_builder, tmp_path_factory):
    """Harbor's oracle and nop on a copy of every tool-calling seed, all in one job."""
    env = harbor_env()
    root = tmp_path_factory.mktemp("harbor-tool-calling")
    copies = root / "tasks"
    copies.mkdir()
    errors: dict[str, str] = {}
    for name in TC_SEED_NAMES:
        try:
            harbor_copy(TC_SEEDS / name, copies / name, tc_image_builder)
        except (RuntimeError, OSError, ValueError) as exc:  # that task's test reports it
            shutil.rmtree(copies / name, ignore_errors=True)
            errors[name] = str(exc)
    n_trials = len(TC_AGENTS) * (len(TC_SEED_NAMES) - len(errors))
    if n_trials == 0:
        pytest.fail(f"no tool-calling task copy could be prepared for Harbor: {errors}", pytrace=False)
    config = root / "job.json"
    config.write_text(json.dumps({"agents": [{"name": agent} for agent in TC_AGENTS]}))
    concurrency = int(os.environ.get("AES_HARBOR_CONCURRENCY", "8"))
    log = root / "harbor.log"
    command = [env["HARBOR_BIN"], "run", "-c", str(config), "-p", str(copies),
               "-n", str(max(1, min(concurrency, n_trials))), "-o", str(root / "jobs"),
               "--job-name", "tool-calling-compat", "-y", "-q"]
    with open(log, "w") as out:
        proc = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    job = HarborJob(proc=proc, jobs_dir=root / "jobs", log=log,
                    timeout=float(os.environ.get("AES_HARBOR_TIMEOUT", "1800")), prepare_errors=errors)
    yield job
    job.stop()


def test_there_are_tool_calling_seeds():
    assert len(TC_SEED_NAMES) >= 4, f"expected at least 4 tool-calling seeds in {TC_SEEDS}"
    for name in TC_SEED_NAMES:
        assert "[[environment.mcp_servers]]" in (TC_SEEDS / name / "task.toml").read_text(), name


@pytest.mark.parametrize("task", TC_SEED_NAMES)
def test_harbor_oracle_scores_one_and_nop_zero(task, tc_harbor_job):
    if task in tc_harbor_job.prepare_errors:
        pytest.fail(tc_harbor_job.prepare_errors[task], pytrace=False)
    trials = {t.agent: t for t in tc_harbor_job.trials() if t.task == task}
    problems = []
    for agent, expected in TC_AGENTS.items():
        trial = trials.get(agent)
        if trial is None:
            problems.append(f"{agent}: Harbor wrote no trial; harbor output:\n{tc_harbor_job.output_tail()}")
        elif trial.exception is not None or trial.rewards is None:
            problems.append(f"{agent}: Harbor's trial failed ({trial.exception or 'no verifier_result'}; "
                            f"see {trial.path})")
        elif {k: float(v) for k, v in trial.rewards.items()} != {"reward": expected}:
            problems.append(f"{agent}: Harbor rewards {trial.rewards}, expected {{'reward': {expected}}} "
                            f"(trial: {trial.path})")
    assert not problems, f"{task}:\n" + "\n".join(problems)
