"""Harbor's own runner gives the reference solution 1.0 on every human-in-the-loop seed.

A HiL task (aes/hil) is a plain Harbor task plus ``blockers.json`` at its root, which Harbor
ignores; its reference reads the withheld answers from ``solution/answers.json``, which Harbor
uploads with the rest of ``solution/``. Running Harbor's ``oracle`` agent on the seeds as they
ship is therefore the ``full_info`` setting: every withheld answer known. This module checks,
with Harbor itself (``launchers/install_harbor.sh``, in a side venv, as in
tests/test_harbor_compat.py), that each seed under aes/domains/hil/seeds scores exactly 1.0.

Harbor runs on copies made by :func:`aes.sandbox.harbor_copy.harbor_copy` (aes's local
substitute for an unpullable ``FROM`` image, ``network_mode`` set to public because Harbor's
no-network sidecar image cannot be pulled here); ``blockers.json`` stays in the copies, so the
run also shows Harbor accepts a task directory that carries it.

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
HIL_SEEDS = REPO / "aes" / "domains" / "hil" / "seeds"
HIL_SEED_NAMES = sorted(p.name for p in HIL_SEEDS.iterdir() if (p / "task.toml").is_file()) if HIL_SEEDS.is_dir() else []


@pytest.fixture(scope="module")
def hil_image_builder(cfg):
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
def hil_harbor_job(hil_image_builder, tmp_path_factory):
    """Harbor's oracle on a copy of every HiL seed, all in one job."""
    env = harbor_env()
    root = tmp_path_factory.mktemp("harbor-hil")
    copies = root / "tasks"
    copies.mkdir()
    errors: dict[str, str] = {}
    for name in HIL_SEED_NAMES:
        try:
            harbor_copy(HIL_SEEDS / name, copies / name, hil_image_builder)
        except (RuntimeError, OSError, ValueError) as exc:  # that task's test reports it
            shutil.rmtree(copies / name, ignore_errors=True)
            errors[name] = str(exc)
    n_trials = len(HIL_SEED_NAMES) - len(errors)
    if n_trials == 0:
        pytest.fail(f"no HiL task copy could be prepared for Harbor: {errors}", pytrace=False)
    config = root / "job.json"
    config.write_text(json.dumps({"agents": [{"name": "oracle"}]}))
    concurrency = int(os.environ.get("AES_HARBOR_CONCURRENCY", "8"))
    log = root / "harbor.log"
    command = [env["HARBOR_BIN"], "run", "-c", str(config), "-p", str(copies),
               "-n", str(max(1, min(concurrency, n_trials))), "-o", str(root / "jobs"),
               "--job-name", "hil-compat", "-y", "-q"]
    with open(log, "w") as out:
        proc = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    job = HarborJob(proc=proc, jobs_dir=root / "jobs", log=log,
                    timeout=float(os.environ.get("AES_HARBOR_TIMEOUT", "1800")), prepare_errors=errors)
    yield job
    job.stop()


def test_there_are_hil_seeds():
    assert len(HIL_SEED_NAMES) >= 6, f"expected at least 6 HiL seeds in {HIL_SEEDS}"
    for name in HIL_SEED_NAMES:
        assert (HIL_SEEDS / name / "blockers.json").is_file(), name
        assert (HIL_SEEDS / name / "solution" / "answers.json").is_file(), name


@pytest.mark.parametrize("task", HIL_SEED_NAMES)
def test_harbor_oracle_scores_one_with_the_answers(task, hil_harbor_job):
    if task in hil_harbor_job.prepare_errors:
        pytest.fail(hil_harbor_job.prepare_errors[task], pytrace=False)
    trials = [t for t in hil_harbor_job.trials() if t.task == task and t.agent == "oracle"]
    assert trials, f"{task}: Harbor wrote no oracle trial; harbor output:\n{hil_harbor_job.output_tail()}"
    trial = trials[0]
    assert trial.exception is None and trial.rewards is not None, \
        f"{task}: Harbor's trial failed ({trial.exception or 'no verifier_result'}; see {trial.path})"
    assert {k: float(v) for k, v in trial.rewards.items()} == {"reward": 1.0}, \
        f"{task}: Harbor's oracle rewards {trial.rewards} (trial: {trial.path})"
