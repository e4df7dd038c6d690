"""The software-engineering domain (domain=swe): config, proposer instructions, the base image
recipe shared by the seeds, the seeds themselves (public tests fail before their patch and pass
after it, test.sh gives no credit before the public tests pass), and the domain's admission checks
in Docker (seeds admitted by `aes validate` with oracle 1.0 and nop exactly 0, broken variants
rejected with the domain's reason codes)."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aes.config import compose_config
from aes.domains import instructions_dir, seeds_dir
from aes.tasks import check_task, find_tasks, load_task
from aes.tasks.static import dockerfile_instructions

REPO = Path(__file__).resolve().parents[1]
DOMAIN = REPO / "aes" / "domains" / "swe"
SEEDS = DOMAIN / "seeds"
KIT = Path(__file__).resolve().parents[1] / "aes" / "domains" / "kit" / "untrusted.py"
TELEMETRY = SEEDS / "telemetry-time-windows"
SEED_DIRS = find_tasks([SEEDS])


def _base() -> list[tuple[str, str]]:
    return [(word, args) for word, args, _ in dockerfile_instructions((DOMAIN / "base" / "Dockerfile").read_text())]


# -- config and instructions -----------------------------------------------------------------------
def test_config_composes_with_the_domain_checks_the_reset_check_and_nop_zero():
    from aes.compose import domain_checks
    from aes.domains.swe.checks import checks

    cfg = compose_config(["domain=swe"])
    assert cfg.domain.name == "swe" and cfg.domain.reset_check is True and cfg.domain.nop_zero is True
    assert domain_checks(cfg) is checks
    assert seeds_dir(cfg.domain) == SEEDS
    assert {p.name for p in instructions_dir(cfg.domain).glob("*.md")} == {"task_format.md", "what_to_build.md"}


def test_task_format_documents_the_base_image_lines_verbatim():
    text = (DOMAIN / "instructions" / "task_format.md").read_text()
    for word, args in _base():
        assert f"{word} {args}" in text
    for code in ("swe.public_tests_pass_unpatched", "swe.public_tests_fail_patched", "swe.private_tests_pass_unpatched",
                 "nop.reward_not_zero"):
        assert code in text


def test_task_format_shows_the_gated_test_sh_the_seeds_use():
    """The proposer copies the seeds' test.sh: the gate on the public tests, then the fraction of private tests."""
    text = (DOMAIN / "instructions" / "task_format.md").read_text()
    shown = text[text.index("```bash\n#!/bin/bash\nmkdir -p /logs/verifier"):]
    shown = shown[len("```bash\n"):shown.index("```", 3)]
    for path in SEED_DIRS:
        script = (path / "tests" / "test.sh").read_text()
        body = [line for line in script.splitlines() if not line.startswith("#") and "print(" not in line]
        assert body == [line for line in shown.splitlines() if not line.startswith("#")], path.name


# -- seeds -----------------------------------------------------------------------------------------
def test_at_least_four_seeds_that_pass_the_static_and_domain_static_checks():
    from aes.domains.swe.checks import static_reasons

    assert len(SEED_DIRS) >= 4
    for path in SEED_DIRS:
        task = load_task(path)
        assert check_task(task) == [], path.name
        assert static_reasons(task) == [], path.name
        command = task.spec.metadata["public_test_command"]
        assert command.startswith("cd /app/repo && ")
        # test.sh's gate runs the public tests as committed (no credit before they pass: nop scores 0),
        # from its own copy: an agent that edits or deletes them in the repository does not open it
        # ... as an unprivileged user, through the kit (tests/untrusted.py, a byte copy)
        assert "python3 -I /tests/untrusted.py --copy /tests/public --env PYTHONPATH=/app/repo " in (
            path / "tests" / "test.sh").read_text()
        assert (path / "tests" / "untrusted.py").read_bytes() == KIT.read_bytes(), path.name
        committed = path / "environment" / "repo" / "tests"
        files = sorted(p.relative_to(committed) for p in committed.rglob("*") if p.is_file())
        assert files and files == sorted(p.relative_to(path / "tests" / "public")
                                         for p in (path / "tests" / "public").rglob("*") if p.is_file()), path.name
        assert all((committed / f).read_bytes() == (path / "tests" / "public" / f).read_bytes() for f in files)


@pytest.mark.parametrize("path", SEED_DIRS, ids=lambda p: p.name)
def test_seed_dockerfiles_start_with_the_base_recipe(path):
    lines = [(word, args) for word, args, _ in dockerfile_instructions((path / "environment" / "Dockerfile").read_text())]
    assert lines[:len(_base())] == _base()


@pytest.mark.parametrize("path", SEED_DIRS, ids=lambda p: p.name)
def test_seed_public_tests_fail_before_the_patch_and_pass_after(path, tmp_path):
    """On the host, without Docker: the repository's own tests against fix.patch."""
    if shutil.which("git") is None:
        pytest.skip("no git on this machine")
    repo = tmp_path / "repo"
    shutil.copytree(path / "environment" / "repo", repo)

    def pytest_exit() -> int:
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=repo,
                              capture_output=True, text=True, timeout=120).returncode

    assert pytest_exit() == 1
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    applied = subprocess.run(["git", "apply", "--whitespace=nowarn", str(path / "solution" / "fix.patch")], cwd=repo,
                             capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    assert pytest_exit() == 0


def test_static_reasons_name_tests_that_import_the_package_or_a_changed_kit(tmp_path):
    from aes.domains.swe.checks import static_reasons

    task = tmp_path / "t"
    shutil.copytree(TELEMETRY, task)
    assert static_reasons(load_task(task)) == []
    tests = task / "tests" / "test_outputs.py"
    tests.write_text(tests.read_text() + "\n\nimport importlib\ntm_ = importlib.import_module('telemetry')\n")
    (task / "tests" / "untrusted.py").write_text("# edited\n" + KIT.read_text())
    reasons = static_reasons(load_task(task))
    assert [r.code for r in reasons] == ["swe.tests_run_agent_code"]
    assert "import_module" in reasons[0].message and "not a byte copy" in reasons[0].message


def test_the_workspace_carries_the_kit(tmp_path):
    """The proposer copies the kit from instructions/kit/ of its workspace, as the task format says."""
    from aes.pool import PoolStore
    from aes.proposer.assignments import SIMPLER, Assignment
    from aes.proposer.workspace import build_workspace

    pool = PoolStore(tmp_path / "pool")
    parent, _ = pool.add(TELEMETRY, name=TELEMETRY.name, status="admitted", source="seed")
    assignment = Assignment(parent.env_id, parent.name, "qwen", None, None, SIMPLER)
    build_workspace(tmp_path / "ws", assignment, pool, tmp_path / "traj", DOMAIN / "instructions", tmp_path / "persist")
    assert (tmp_path / "ws" / "instructions" / "kit" / "untrusted.py").read_bytes() == KIT.read_bytes()


def test_static_reasons_name_a_missing_command_and_patch(tmp_path):
    from aes.domains.swe.checks import static_reasons

    task = tmp_path / "t"
    shutil.copytree(TELEMETRY, task)
    toml = task / "task.toml"
    toml.write_text("\n".join(line for line in toml.read_text().splitlines() if "public_test_command" not in line))
    (task / "solution" / "fix.patch").unlink()
    assert [r.code for r in static_reasons(load_task(task))] == ["swe.no_public_test_command", "swe.no_patch"]
    (task / "solution" / "fix.patch").write_text((TELEMETRY / "solution" / "fix.patch").read_text())
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\nsed -i 's/int(ts \\/ width)/ts \\/\\/ width/' x.py\n")
    assert "swe.solution_not_a_patch" in [r.code for r in static_reasons(load_task(task))]


# -- in Docker -------------------------------------------------------------------------------------
def _variant(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    shutil.copytree(TELEMETRY, path)
    return path


def _drop_public_regression_test(path: Path) -> None:
    """The task's author drops it: from the repository and from test.sh's copy of the public tests."""
    for tests in (path / "environment" / "repo" / "tests" / "test_windows.py", path / "tests" / "public" / "test_windows.py"):
        text = tests.read_text()
        tests.write_text(text[:text.index("def test_timestamp_just_before_the_epoch")])


@pytest.mark.docker
@pytest.mark.slow
def test_an_agent_that_edits_the_public_tests_instead_of_the_code_earns_zero(sandbox, cfg, tmp_path):
    """The gate runs the public tests as committed: deleting the failing regression test (or making
    every test in the repository pass some other way) does not open it. Each attack is the variant's
    solve.sh, run as the agent would run it."""
    from aes.sandbox import OracleAgent, TrialRunner

    runner = TrialRunner(cfg.sandbox, sandbox)
    attacks = {
        "delete-regression-test": "python3 - <<'PY'\nimport re\np = '/app/repo/tests/test_windows.py'\n"
                                  "s = open(p).read()\nopen(p, 'w').write(s[:s.index('def test_timestamp_just_before_the_epoch')])\nPY\n",
        "conftest-passes-all": "cat > /app/repo/tests/conftest.py <<'PY'\nimport pytest\n\n"
                               "@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
                               "    outcome = yield\n    report = outcome.get_result()\n    report.outcome = 'passed'\nPY\n"
                               "cp /app/repo/tests/conftest.py /app/repo/conftest.py\n",
        # test.sh puts /app/repo on PYTHONPATH for the gate: a pytest of the agent's would come first there
        "shadow-pytest": "printf 'import sys\\nprint(\"1 passed\")\\nsys.exit(0)\\n' > /app/repo/pytest.py\n"
                         "mkdir -p /app/repo/pytest && cp /app/repo/pytest.py /app/repo/pytest/__main__.py\n"
                         "cp /app/repo/pytest.py /app/repo/pytest/__init__.py\n",
    }
    for name, script in attacks.items():
        variant = _variant(tmp_path, name)
        (variant / "solution" / "solve.sh").write_text("#!/bin/bash\nset -e\n" + script)
        task = load_task(variant)
        result = runner.run(task, OracleAgent())
        assert result.agent_exit_code == 0, (name, result.agent_output)  # the attack itself ran
        assert result.reward == 0.0, (name, result.verifier_output[-2000:])
    # the shadowed pytest is live where test.sh runs in the agent's own container (Harbor's in-place
    # verifier, sandbox.trusted_verifier=false) and ends the public suite "green" there; the private
    # test_gate_* still fails, called through the kit, so nothing is earned there either
    in_place = TrialRunner(dataclasses.replace(cfg.sandbox, trusted_verifier=False), sandbox)
    opened = in_place.run(load_task(tmp_path / "shadow-pytest"), OracleAgent())
    assert opened.reward == 0.0, opened.verifier_output[-2000:]
    assert "test_gate_the_issue_is_fixed" in opened.verifier_output


FORGE = r"""
import atexit, os, sys, time

def _forge():
    for path, text in (("/logs/verifier/reward.txt", "1\n"), ("/logs/verifier/junit.xml",
                       '<testsuite tests="1" failures="0" errors="0" skipped="0"><testcase name="t"/></testsuite>')):
        try:
            with open(path, "w") as f:
                f.write(text)
        except OSError:
            pass
    for path in ("/tests/test_outputs.py",):  # as root: every test passes
        try:
            with open(path, "w") as f:
                f.write("def test_ok():\n    pass\n")
        except OSError:
            pass

_forge()
atexit.register(_forge)
if os.fork() == 0:  # a daemon that keeps forging after test.sh has written the reward
    os.setsid()
    for _ in range(600):
        _forge()
        time.sleep(0.05)
    os._exit(0)
if "pytest" in sys.modules or "_pytest" in sys.modules:
    os._exit(0)  # the test run ends "green" at import
"""


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("trusted", [True, False], ids=["sealed", "in-place"])
def test_package_code_that_forges_the_reward_at_import_earns_zero(sandbox, cfg, tmp_path, trusted):
    """The tests run the package: code in it that writes the reward, rewrites the junit report or the
    tests (at import, at exit, from a daemon left behind) and ends pytest with status 0 earns nothing,
    in the sealed verifier and in the agent's own container alike: the package only ever runs as an
    unprivileged user in a child process (tests/untrusted.py), never in the process that decides."""
    from aes.sandbox import OracleAgent, TrialRunner

    variant = _variant(tmp_path, "forge")
    (variant / "solution" / "forge.py").write_text(FORGE)
    (variant / "solution" / "solve.sh").write_text("#!/bin/bash\nset -e\ncat /solution/forge.py >> /app/repo/telemetry/__init__.py\n")
    runner = TrialRunner(dataclasses.replace(cfg.sandbox, trusted_verifier=trusted), sandbox)
    result = runner.run(load_task(variant), OracleAgent())
    assert result.agent_exit_code == 0, result.agent_output
    assert result.reward == 0.0, result.verifier_output[-2000:]


@pytest.mark.docker
@pytest.mark.slow
def test_domain_checks_reject_broken_variants_with_their_codes(sandbox, cfg, tmp_path):
    from aes.domains.swe.checks import checks
    from aes.sandbox import TrialRunner

    runner = TrialRunner(cfg.sandbox, sandbox)
    # the public suite has no failing regression test
    passes = _variant(tmp_path, "public-passes")
    _drop_public_regression_test(passes)
    # a public test the patch does not fix
    unfixed = _variant(tmp_path, "public-unfixed")
    with open(unfixed / "environment" / "repo" / "tests" / "test_windows.py", "a") as f:
        f.write("\n\ndef test_week_alignment():\n    assert window_start(0, 7) == 4\n")
    # private tests that the buggy repository already passes (test.sh's gate alone would hide that)
    lenient = _variant(tmp_path, "private-lenient")
    (lenient / "tests" / "test_outputs.py").write_text(
        "import os, sys\nsys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\nfrom untrusted import Untrusted\n\n"
        "def test_gate_positive_windows():\n    with Untrusted(['/app/repo']) as child:\n"
        "        assert child.call('telemetry.window_index', 5, 10) == 0\n\n"
        "def test_positive_windows():\n    assert True\n")
    codes = {}
    for path in (passes, unfixed, lenient):
        build = runner.sandbox.build(load_task(path))
        assert build.image, build.reason
        codes[path.name] = [r.code for r in checks(path, runner, build.image)]
    assert codes == {"public-passes": ["swe.public_tests_pass_unpatched"],
                     "public-unfixed": ["swe.public_tests_fail_patched"],
                     # lenient private tests also pay the unpatched repository that special-cases the issue
                     "private-lenient": ["swe.private_tests_pass_unpatched", "swe.special_cased_rewarded"]}


@pytest.mark.docker
@pytest.mark.slow
def test_validator_rejects_variants_with_the_domain_reason_and_an_ungated_reward(sandbox, tmp_path):
    from aes.admission import Validator
    from aes.compose import domain_checks

    cfg = compose_config(["domain=swe"])
    validator = Validator(cfg.sandbox, reset_check=cfg.domain.reset_check, domain_checks=domain_checks(cfg),
                          nop_zero=cfg.domain.nop_zero)
    # no failing public test: the public gate lets the untouched repository through, the private
    # test_gate_* does not (doing nothing still earns 0); the domain check names the public suite
    passes = _variant(tmp_path, "public-passes")
    _drop_public_regression_test(passes)
    report = validator.validate(passes)
    assert not report.valid and [r.code for r in report.reasons] == ["swe.public_tests_pass_unpatched"]
    assert report.oracle_reward == 1.0 and report.nop_reward == 0.0
    # test.sh without either gate: doing nothing earns the share of private tests that pass on the
    # buggy repository; admission stops there
    ungated = _variant(tmp_path, "ungated")
    script = ungated / "tests" / "test.sh"
    text = script.read_text()
    text = text.replace("if gates and all(gates) and parts else 0.0", "if parts else 0.0").replace(
        'parts = [ok for name, ok in cases.items() if not name.startswith("test_gate_")]', "parts = list(cases.values())")
    script.write_text("#!/bin/bash\nmkdir -p /logs/verifier\n" + text[text.index("\ncd /tests\n") + 1:])
    report = validator.validate(ungated)
    assert not report.valid and [r.code for r in report.reasons] == ["nop.reward_not_zero"]
    assert report.oracle_reward == 1.0 and report.nop_reward > 0.0


@pytest.mark.docker
@pytest.mark.slow
def test_seeds_pass_aes_validate_with_the_domain_checks(sandbox):
    from typer.testing import CliRunner

    from aes.cli import app

    result = CliRunner().invoke(app, ["validate", str(SEEDS), "--set", "domain=swe", "--quiet"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"{len(SEED_DIRS)}/{len(SEED_DIRS)} valid" in result.output
    assert "no-op = 0" in result.output  # nop_zero: doing nothing scored exactly 0 on every seed


# -- wrong work: three plausible wrong fixes earn < 0.5, the special-cased probe ---------------------
WINDOWS = "/app/repo/telemetry/windows.py"
WRONG_FIXES = {
    # the examples answered from a table built from the public tests (the probe's own script)
    "special-cased": "python3 /solution/special.py /app/repo tests\n",
    # floor, but of a float division: right for the example, wrong for large timestamps
    "float-floor": f"sed -i 's|    return int(ts / width)|    import math\\n    return math.floor(ts / width)|' {WINDOWS}\n",
    # one less for negatives: wrong on exact multiples (-1000 // 1000 is -1, not -2) and large values
    "negative-minus-one": f"sed -i 's|    return int(ts / width)|    return int(ts / width) - (1 if ts < 0 else 0)|' {WINDOWS}\n",
}
LENIENT = '''import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from untrusted import Untrusted

SECOND = 1_000_000_000


def _tm():
    return Untrusted(["/app/repo"])


def test_gate_the_issue_is_fixed():
    with _tm() as child:
        assert child.call("telemetry.window_index", -1, SECOND) == -1


def test_examples_again():
    with _tm() as child:
        assert child.call("telemetry.window_start", -1, SECOND) == -SECOND
        assert child.call("telemetry.window_bounds", 1_500, 1_000) == (1_000, 2_000)


def test_between_again():
    with _tm() as child:
        assert child.call("telemetry.windows_between", 1_500, 3_200, 1_000) == [1, 2, 3]
'''


@pytest.mark.docker
@pytest.mark.slow
def test_plausible_wrong_fixes_earn_under_half_and_the_probe_rejects_tests_that_pay_for_examples(sandbox, cfg,
                                                                                                   tmp_path):
    from aes.domains.swe.probes import SCRIPT, SpecialCased, special_cased_reasons
    from aes.sandbox import OracleAgent, TrialRunner

    runner = TrialRunner(cfg.sandbox, sandbox)
    rewards = {}
    for name, script in WRONG_FIXES.items():
        variant = _variant(tmp_path, name)
        (variant / "solution" / "special.py").write_text(SCRIPT)
        (variant / "solution" / "solve.sh").write_text("#!/bin/bash\nset -e\n" + script)
        result = runner.run(load_task(variant), OracleAgent())
        assert result.agent_exit_code == 0, (name, result.agent_output)
        rewards[name] = result.reward
    print(rewards)
    assert all(r is not None and r < 0.5 for r in rewards.values()), rewards
    # the probe: the seed's tests give the special-cased repository nothing; tests whose gate is only the
    # issue's example and whose other tests repeat the public ones pay for it, and are rejected
    lenient = _variant(tmp_path, "lenient")
    (lenient / "tests" / "test_outputs.py").write_text(LENIENT)
    found = {}
    for name, path in (("seed", TELEMETRY), ("lenient", lenient)):
        task = load_task(path)
        build = sandbox.build(task)
        assert build.image, build.reason
        trial = runner.run(task, SpecialCased(), build.image)
        assert trial.agent_info.get("probe_exit") == 0, trial.agent_info
        found[name] = (trial.reward, [r.code for r in special_cased_reasons(trial)])
    print(found)
    assert found["seed"] == (0.0, [])
    assert found["lenient"][0] >= 0.5 and found["lenient"][1] == ["swe.special_cased_rewarded"]
