"""Admission checks 1-4 on the seed tasks and on deliberately broken fixtures."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from aes.admission import Validator
from tests.conftest import FIXTURES, REPO, SEEDS

pytestmark = pytest.mark.docker

EXPECTED = {
    "good": [],
    "legacy-toml": [],
    "nop-passes": ["nop.reward_too_high"],
    "wrong-solution": ["oracle.reward_below_one"],
    "dockerfile-fails": ["build.failed"],
    # a do-nothing run without a reward counts as < 0.5, as in Harbor (a warning says so)
    "no-reward-file": ["oracle.no_reward_file"],
    "bad-reward-file": ["oracle.bad_reward_file"],
    "malformed-toml": ["static.task_toml.syntax"],
    "solution-in-image": ["static.secret_in_image"],
    "missing-solution": ["static.layout.missing_file"],
    "dockerfile-heredoc": ["static.dockerfile_heredoc"],
    "dangerous-compose": ["static.dangerous_option"],
    "solution-timeout": ["oracle.timeout"],
    "verifier-timeout": ["oracle.verifier_timeout"],
}


@pytest.fixture(scope="module")
def validator(sandbox, cfg):
    return Validator(cfg.sandbox)


@pytest.mark.parametrize("name", sorted(p.name for p in SEEDS.iterdir() if p.is_dir()))
def test_seed_task_is_valid(validator, name):
    report = validator.validate(SEEDS / name)
    assert report.valid, [str(r) for r in report.reasons]
    assert report.oracle_reward == 1.0 and report.nop_reward < 0.5


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_verdict(validator, name):
    report = validator.validate(FIXTURES / name)
    codes = sorted({r.code for r in report.reasons})
    assert codes == sorted(set(EXPECTED[name])), [str(r) for r in report.reasons]
    assert report.valid is (not EXPECTED[name])


def test_every_fixture_has_an_expectation():
    assert sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()) == sorted(EXPECTED)


def test_cli_json_and_exit_status(sandbox, tmp_path):
    out = tmp_path / "v.json"
    cmd = [sys.executable, "-m", "aes.cli", "validate", str(FIXTURES / "good"),
           str(FIXTURES / "wrong-solution"), "--json", str(out), "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 1, proc.stderr
    records = json.loads(out.read_text())
    assert [set(r) for r in records] == [{"task", "valid", "reasons", "oracle_reward", "nop_reward", "seconds", "notes"}] * 2
    assert [r["valid"] for r in records] == [True, False]
    assert records[1]["reasons"][0].startswith("oracle.reward_below_one: ")
    good = subprocess.run(cmd[:5] + ["--quiet"], capture_output=True, text=True, cwd=REPO)
    assert good.returncode == 0, good.stdout + good.stderr


def test_run_entry_point_validates_a_task_dir(sandbox, tmp_path):
    cmd = [sys.executable, "-m", "aes.run", "mode=validate", f"tasks={FIXTURES / 'good'}",
           f"hydra.run.dir={tmp_path}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((tmp_path / "validation.json").read_text())[0]["valid"] is True
    assert (tmp_path / "config.yaml").exists()


def test_a_loader_warning_in_the_image_is_not_a_leak(validator, tmp_path):
    """The check that the image hides tests/ and solution/ asks the engine, not a program whose
    output the image's loader can garble (``ENV LD_PRELOAD`` of a missing library warns on stderr; one in
    ``/usr``, which the agent's work never reaches in the verifier: a missing one elsewhere is a hook the
    agent could arm, ``build.startup_hook``)."""
    from tests.conftest import make_task

    path = make_task(tmp_path, dockerfile="FROM python:3.12-slim\nENV LD_PRELOAD=/usr/lib/nonexistent.so\nWORKDIR /app\n")
    report = validator.validate(path)
    assert report.valid, [str(r) for r in report.reasons]


def test_a_reference_that_installs_software_is_told_why_it_fails_sealed(validator, tmp_path):
    """A reference whose work is installing a tool passes only with in-place verification: the
    rejection names what the sealed verifier did not carry and the setting to change."""
    from tests.conftest import make_task

    solve = "printf '#!/bin/sh\\necho 42\\n' > /usr/local/bin/answer; chmod +x /usr/local/bin/answer\n"
    test = ('#!/bin/bash\nif [ "$(answer)" = 42 ]; then echo 1 > /logs/verifier/reward.txt; '
            'else echo 0 > /logs/verifier/reward.txt; fi\n')
    report = validator.validate(make_task(tmp_path, solve=solve, test=test))
    assert [r.code for r in report.reasons] == ["oracle.reward_below_one"]
    assert "/usr/local/bin/answer" in report.reasons[0].message
    assert "sandbox.trusted_verifier=false" in report.reasons[0].message


def test_declared_limits_beyond_aes_bounds_are_noted(validator, tmp_path):
    from tests.conftest import make_task

    toml = '[agent]\ntimeout_sec = 1e9\n[environment]\nnetwork_mode = "no-network"\n'
    report = validator.validate(make_task(tmp_path, toml=toml))
    assert report.valid and any("sandbox.max_agent_timeout_sec" in n for n in report.notes)


def test_the_reset_check_rejects_an_environment_that_starts_differently(sandbox, cfg, tmp_path):
    """Domains of App. C add a reset check: two fresh environments start alike, the reference passes twice."""
    from tests.conftest import make_task

    validator = Validator(cfg.sandbox, reset_check=True)
    steady = validator.validate(make_task(tmp_path, "steady"))
    assert steady.valid, [str(r) for r in steady.reasons]
    random_start = ('FROM python:3.12-slim\nWORKDIR /app\nENTRYPOINT ["/bin/sh", "-c", '
                    '"head -c 16 /dev/urandom | od -x > /app/seed.txt; exec \\"$@\\"", "sh"]\n')
    drifting = validator.validate(make_task(tmp_path, "drifting", dockerfile=random_start))
    assert [r.code for r in drifting.reasons] == ["reset.state_differs"]
    clock_start = random_start.replace("head -c 16 /dev/urandom | od -x", "date +%s%N")  # data seeded from the clock
    clocked = validator.validate(make_task(tmp_path, "clocked", dockerfile=clock_start))
    assert [r.code for r in clocked.reasons] == ["reset.state_differs"]


def test_domains_that_demand_a_zero_for_doing_nothing_reject_partial_credit(sandbox, cfg, tmp_path):
    """App. C.1: doing nothing earns 0; a test section that credits an untouched environment fails it."""
    from tests.conftest import REWARD_TEST, make_task

    partial = REWARD_TEST.replace("echo 0 >", "echo 0.25 >")
    task = make_task(tmp_path, "partial", test=partial)
    assert Validator(cfg.sandbox).validate(task).valid  # 0.25 < admission.nop_max_reward
    report = Validator(cfg.sandbox, nop_zero=True).validate(task)
    assert [r.code for r in report.reasons] == ["nop.reward_not_zero"] and "0.250" in report.reasons[0].message


def test_the_reference_runs_logs_are_kept_when_asked(sandbox, cfg, tmp_path):
    """``aes validate --logs DIR``: what the reference leaves in /logs/agent (a screenshot sequence) is kept."""
    from tests.conftest import make_task

    solve = "echo 42 > /app/answer.txt\nfor i in 1 2; do echo $i > /logs/agent/shot-$i.txt; done\n"
    report = Validator(cfg.sandbox, logs_dir=tmp_path / "logs").validate(make_task(tmp_path, "shots", solve=solve))
    kept = tmp_path / "logs" / "test__shots" / "oracle" / "agent"
    assert report.valid and sorted(p.name for p in kept.iterdir()) == ["shot-1.txt", "shot-2.txt"]
    assert any("reference run's logs" in n for n in report.notes)
