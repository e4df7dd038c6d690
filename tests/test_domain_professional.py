"""The professional-work domain (domain=professional): config, proposer instructions, the base
image recipe shared by the seeds, the seeds' metadata and gated, section-weighted reward, and the
domain's admission checks in Docker (seeds admitted by `aes validate`, oracle 1.0 and nop exactly
0, broken variants rejected with the domain's reason codes)."""

from __future__ import annotations

import ast
import re
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
DOMAIN = REPO / "aes" / "domains" / "professional"
SEEDS = DOMAIN / "seeds"
VARIANCE = SEEDS / "budget-variance-q1"
SEED_DIRS = find_tasks([SEEDS])


def _base() -> list[tuple[str, str]]:
    return [(word, args) for word, args, _ in dockerfile_instructions((DOMAIN / "base" / "Dockerfile").read_text())]


# -- config and instructions -----------------------------------------------------------------------
def test_config_composes_with_the_domain_checks_and_the_reset_check():
    from aes.compose import domain_checks
    from aes.domains.professional.checks import checks

    cfg = compose_config(["domain=professional"])
    assert cfg.domain.name == "professional" and cfg.domain.reset_check is True and cfg.domain.nop_zero is True
    assert domain_checks(cfg) is checks
    assert seeds_dir(cfg.domain) == SEEDS
    assert {p.name for p in instructions_dir(cfg.domain).glob("*.md")} == {"task_format.md", "what_to_build.md"}


def test_task_format_documents_the_base_image_lines_verbatim():
    text = (DOMAIN / "instructions" / "task_format.md").read_text()
    for word, args in _base():
        assert f"{word} {args}" in text
    for code in ("professional.inputs_changed", "professional.deliverable_missing", "nop.reward_not_zero",
                 "professional.values_only_rewarded"):
        assert code in text
    for words in ("test_gate_deliverables_exist", "test_gate_inputs_unchanged", "WEIGHTS = {"):
        assert words in text


def test_task_format_quotes_the_seeds_test_sh():
    text = (DOMAIN / "instructions" / "task_format.md").read_text()
    for path in SEED_DIRS:
        assert (path / "tests" / "test.sh").read_text() in text, path.name


def test_base_image_pins_every_package():
    [pip] = [args for word, args in _base() if word == "RUN" and "--break-system-packages" in args]
    packages = [a for a in pip.split() if not a.startswith("-") and a not in ("pip", "install")]
    assert packages and all("==" in p for p in packages), packages
    assert {p.split("==")[0] for p in packages} >= {"openpyxl", "formulas", "reportlab", "pypdf"}


# -- seeds -----------------------------------------------------------------------------------------
def test_at_least_four_seeds_that_pass_the_static_and_domain_static_checks():
    from aes.domains.professional.checks import static_reasons

    assert len(SEED_DIRS) >= 4
    for path in SEED_DIRS:
        task = load_task(path)
        assert check_task(task) == [], path.name
        reasons, inputs, deliverables = static_reasons(task)
        assert reasons == [] and inputs and deliverables, path.name
        assert all(p.startswith("/app/inputs") for p in inputs)
        assert all(p.startswith("/app/deliverables/") for p in deliverables)
        assert "read-only" in task.instruction


@pytest.mark.parametrize("path", SEED_DIRS, ids=lambda p: p.name)
def test_seed_dockerfiles_start_with_the_base_recipe(path):
    lines = [(word, args) for word, args, _ in dockerfile_instructions((path / "environment" / "Dockerfile").read_text())]
    assert lines[:len(_base())] == _base()


def _weights(test_outputs: Path) -> dict[str, float]:
    return ast.literal_eval(re.search(r"^WEIGHTS = (\{.*?\})$", test_outputs.read_text(), re.M | re.S).group(1))


@pytest.mark.parametrize("path", SEED_DIRS, ids=lambda p: p.name)
def test_seed_rewards_are_gated_and_weighted_by_section(path):
    """Both gates are there; the weights sum to 1; every test is a gate or in a weighted section,
    and every section has a test."""
    source = path / "tests" / "test_outputs.py"
    tests, weights = _test_names(source), _weights(source)
    assert {"test_gate_deliverables_exist", "test_gate_inputs_unchanged"} <= set(tests)
    assert abs(sum(weights.values()) - 1.0) < 1e-9 and all(w > 0 for w in weights.values()), weights
    sections = {name.split("_")[1] for name in tests if not name.startswith("test_gate_")}
    assert sections == set(weights), (sections, weights)


def _test_names(path: Path) -> list[str]:
    return [node.name for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]


def _reward(tmp_path: Path, cases: dict[str, str]) -> float:
    """The reward test.sh writes for a junit report whose test cases end as ``cases`` says
    ("pass", "failure", "error" or "skipped"), with the weights of the cash forecast seed."""
    script = (SEEDS / "cash-forecast-13wk" / "tests" / "test.sh").read_text()
    code = script.split("<<'PY'\n", 1)[1].rsplit("\nPY", 1)[0].replace("/logs/verifier/", f"{tmp_path}/")
    shutil.copy(SEEDS / "cash-forecast-13wk" / "tests" / "test_outputs.py", tmp_path / "test_outputs.py")
    body = "".join(f'<testcase classname="test_outputs" name="{name}">' + ("" if end == "pass" else f"<{end}/>")
                   + "</testcase>" for name, end in cases.items())
    (tmp_path / "junit.xml").write_text(f'<testsuites><testsuite name="pytest">{body}</testsuite></testsuites>')
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, capture_output=True)
    return float((tmp_path / "reward.txt").read_text())


def test_reward_is_zero_without_the_gates_and_weighted_by_section_with_them(tmp_path):
    tests = _test_names(SEEDS / "cash-forecast-13wk" / "tests" / "test_outputs.py")
    assert _reward(tmp_path, dict.fromkeys(tests, "pass")) == 1.0
    nop = {name: "pass" if name == "test_gate_inputs_unchanged" else "failure" for name in tests}
    assert _reward(tmp_path, nop) == 0.0
    edited_inputs = {**dict.fromkeys(tests, "pass"), "test_gate_inputs_unchanged": "failure"}
    assert _reward(tmp_path, edited_inputs) == 0.0
    # a pasted-values workbook: the model section (25%, two tests) is lost, and with the recalculation
    # failing so are the LIVE sections (Base and risk, the CSV's test in risk included); the memo stays
    pasted = {**dict.fromkeys(tests, "pass"), "test_model_results_are_formulas": "failure",
              "test_model_recalculates_when_inputs_change": "error", "test_base_forecast": "failure",
              "test_risk_stress_forecast": "failure", "test_risk_summary_sheet": "failure"}
    assert _reward(tmp_path, pasted) == pytest.approx(0.15, abs=1e-4)
    # constants disguised as formulas: every value test passes and so does "results are formulas",
    # but the recalculation does not: Base and risk earn nothing (issue 25: 0.875 before the gate)
    disguised = {**dict.fromkeys(tests, "pass"), "test_model_recalculates_when_inputs_change": "failure"}
    assert _reward(tmp_path, disguised) == pytest.approx(0.25 / 2 + 0.15, abs=1e-4)
    memo_half = {**dict.fromkeys(tests, "pass"), "test_memo_agrees_with_the_workbook": "skipped"}
    assert _reward(tmp_path, memo_half) == pytest.approx(1 - 0.15 / 2, abs=1e-4)
    assert _reward(tmp_path, {}) == 0.0


def _seed_tests(path: Path):
    """A seed's tests/test_outputs.py as a module (it imports openpyxl, formulas and pypdf only
    inside its functions)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"professional_{path.name.replace('-', '_')}",
                                                  path / "tests" / "test_outputs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REFERENCES = ["=B2*C2", "=SUM(Inputs!B2:B9)", "='Weekly plan'!C3", "=$B$2", "=Inputs!$B$4*Inputs!C9", "=b2+1",
              '=COUNTIF(Base!E2:E14,"<"&Inputs!$B$3)', "=SUM(A:A)", "=SUM(2:2)", "=Q1!B2", "=LOG10(B2)",
              "='It''s Q1'!A1", '=IF(AND(G2,H2),"OK","BREACH")']
CONSTANTS = ["=126352.40", "=100+26252.4", "=LOG10(100)", '="B2"', '="a""B2"""', "=1E5", "=0", "=ATAN2(1,2)",
             "=TRUE", "=PI()*2", "126352.4", "B2", 126352.4, None]


@pytest.mark.parametrize("path", SEED_DIRS, ids=lambda p: p.name)
def test_seed_result_cells_count_only_as_formulas_that_reference_cells(path):
    """Every seed's tests credit a result cell only when its formula references a cell or range:
    not a pasted value, a constant formula, a function name with digits, or a reference in quotes."""
    module = _seed_tests(path)
    assert [f for f in REFERENCES if not module.references_cells(f)] == []
    assert [f for f in CONSTANTS if module.references_cells(f)] == []
    # the same helper in every seed, and every value test reads the result cells through it
    import inspect

    first = _seed_tests(SEED_DIRS[0])
    assert inspect.getsource(module.references_cells) == inspect.getsource(first.references_cells)
    assert module._CELL_REF.pattern == first._CELL_REF.pattern and module.RESULTS
    source = (path / "tests" / "test_outputs.py").read_text()
    helpers = source[source.index("_QUOTED = "):source.index("\n\n\n", source.index("def live("))]
    assert helpers in (DOMAIN / "instructions" / "task_format.md").read_text()


def test_static_reasons_name_bad_metadata_and_paths_the_instruction_does_not_name(tmp_path):
    from aes.domains.professional.checks import static_reasons

    task = tmp_path / "t"
    shutil.copytree(VARIANCE, task)
    toml = task / "task.toml"
    original = toml.read_text()
    toml.write_text(original.replace('inputs = ["/app/inputs"]', 'inputs = "inputs"'))
    assert [r.code for r in static_reasons(load_task(task))[0]] == ["professional.bad_metadata"]
    toml.write_text(original.replace('inputs = ["/app/inputs"]', 'inputs = ["/app/inputs", "/srv/ledger.db"]')
                    .replace('"/app/deliverables/flagged.csv"]', '"/app/deliverables/flagged.csv", "/app/out/memo.pdf"]'))
    assert [r.code for r in static_reasons(load_task(task))[0]] == ["professional.input_not_in_instruction",
                                                                   "professional.deliverable_not_in_instruction"]


# -- in Docker -------------------------------------------------------------------------------------
@pytest.mark.docker
def test_domain_checks_reject_broken_variants_with_their_codes(sandbox, cfg, tmp_path):
    from aes.domains.professional.checks import checks
    from aes.sandbox import TrialRunner

    runner = TrialRunner(cfg.sandbox, sandbox)
    # the reference writes into the read-only inputs (and its tests never look at them)
    scribbler = tmp_path / "scribbler"
    shutil.copytree(VARIANCE, scribbler)
    (scribbler / "solution" / "solve.sh").write_text(
        "#!/bin/bash\nset -euo pipefail\npython3 /solution/build_variance.py\n"
        "echo 'reviewed' >> /app/inputs/variance_policy.md\ntouch /app/inputs/notes.txt\n")
    tests = scribbler / "tests" / "test_outputs.py"
    text = tests.read_text()
    tests.write_text(text[:text.index("def test_gate_inputs_unchanged")])
    # a deliverable that the reference never writes (and one that is not what it says)
    lazy = tmp_path / "lazy"
    shutil.copytree(VARIANCE, lazy)
    toml = lazy / "task.toml"
    toml.write_text(toml.read_text().replace(
        '"/app/deliverables/flagged.csv"]', '"/app/deliverables/flagged.csv", "/app/deliverables/memo.pdf"]'))
    (lazy / "instruction.md").write_text((lazy / "instruction.md").read_text() + "\nAlso `/app/deliverables/memo.pdf`.\n")
    (lazy / "solution" / "solve.sh").write_text(
        "#!/bin/bash\nset -euo pipefail\npython3 /solution/build_variance.py\n"
        "cp /app/deliverables/flagged.csv /app/deliverables/variance_q1.xlsx\n")
    codes = {}
    for path in (scribbler, lazy):
        build = runner.sandbox.build(load_task(path))
        assert build.image, build.reason
        reasons = checks(path, runner, build.image)
        codes[path.name] = [r.code for r in reasons]
        if path is scribbler:
            assert "/app/inputs/variance_policy.md (changed)" in reasons[0].message
            assert "/app/inputs/notes.txt (added)" in reasons[0].message
    assert codes == {"scribbler": ["professional.inputs_changed"],
                     "lazy": ["professional.deliverable_wrong_format", "professional.deliverable_missing"]}


CASH = SEEDS / "cash-forecast-13wk"


@pytest.mark.docker
def test_values_only_probe_earns_under_half_and_a_seed_that_credits_pasted_values_is_rejected(sandbox, cfg,
                                                                                               tmp_path):
    """The reference's deliverables with every workbook formula replaced by its value earn < 0.5 on
    the cash forecast seed; a variant whose value tests read the recalculated values as they are
    (pasted values count, as before the seeds required formulas that reference cells) is rejected."""
    from aes.domains.professional.checks import VALUES_ONLY_MAX, ValuesOnly, _values_only, checks
    from aes.sandbox import TrialRunner

    runner = TrialRunner(cfg.sandbox, sandbox)
    task = load_task(CASH)
    build = runner.sandbox.build(task)
    assert build.image, build.reason
    trial = runner.run(task, ValuesOnly(["/app/deliverables/cash_forecast.xlsx"]), build.image)
    assert trial.agent_info["solve_exit"] == 0 and trial.agent_info["rewrite_exit"] == 0, trial.agent_info
    assert "formulas replaced by their values" in trial.agent_info["rewrite_output"]
    assert trial.reward is not None and trial.reward < VALUES_ONLY_MAX, (trial.reward, trial.verifier_output[-2000:])
    assert trial.reward == pytest.approx(0.15, abs=1e-4)  # the memo: the LIVE sections need a recalculation
    assert _values_only(trial) == []

    lenient = tmp_path / "lenient"
    shutil.copytree(CASH, lenient)
    tests = lenient / "tests" / "test_outputs.py"
    text = tests.read_text()
    strict = "    return {**values, **dict.fromkeys((s.upper(), c) for s, c in pasted(path))}\n"
    assert strict in text
    assert '\nLIVE = ["base", "risk"]\n' in text
    tests.write_text(text.replace(strict, "    return values\n").replace('\nLIVE = ["base", "risk"]\n', "\nLIVE = []\n"))
    build = runner.sandbox.build(load_task(lenient))
    assert build.image, build.reason
    reasons = checks(lenient, runner, build.image)
    assert [r.code for r in reasons] == ["professional.values_only_rewarded",
                                         "professional.disguised_constants_rewarded"], reasons
    assert "its tests credit pasted values" in reasons[0].message and "0.75" in reasons[0].message


@pytest.mark.docker
def test_validator_rejects_a_variant_with_the_domain_reason(sandbox, tmp_path):
    from aes.admission import Validator
    from aes.compose import domain_checks

    cfg = compose_config(["domain=professional"])
    path = tmp_path / "scribbler"
    shutil.copytree(VARIANCE, path)
    (path / "solution" / "solve.sh").write_text(
        "#!/bin/bash\nset -euo pipefail\npython3 /solution/build_variance.py\nrm /app/inputs/variance_policy.md\n")
    tests = path / "tests" / "test_outputs.py"
    text = tests.read_text()
    tests.write_text(text[:text.index("def test_gate_inputs_unchanged")])
    report = Validator(cfg.sandbox, reset_check=cfg.domain.reset_check, domain_checks=domain_checks(cfg),
                       nop_zero=cfg.domain.nop_zero).validate(path)
    assert not report.valid and [r.code for r in report.reasons] == ["professional.inputs_changed"]
    assert "variance_policy.md (gone)" in report.reasons[0].message
    assert report.oracle_reward == 1.0 and report.nop_reward == 0.0


@pytest.mark.docker
@pytest.mark.slow
def test_seeds_pass_aes_validate_with_the_domain_checks(sandbox):
    from typer.testing import CliRunner

    from aes.cli import app

    result = CliRunner().invoke(app, ["validate", str(SEEDS), "--set", "domain=professional", "--quiet"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"{len(SEED_DIRS)}/{len(SEED_DIRS)} valid" in result.output


@pytest.mark.docker
@pytest.mark.slow
def test_three_wrong_attempts_earn_under_half_and_the_disguised_constants_probe(sandbox, cfg, tmp_path):
    """On the cash forecast seed: the workbook's results pasted as values, written as constants that
    pretend to reference a cell (=126352.4+0*Inputs!B2: 0.875 before the LIVE gate), and an input edited
    so the numbers come out as the agent likes each earn < 0.5; the disguised-constants probe gives no
    reason on the seed and rejects a variant without the LIVE gate."""
    from aes.domains.professional.checks import VALUES_ONLY_SCRIPT, ValuesOnly, _values_only
    from aes.sandbox import OracleAgent, TrialRunner

    runner = TrialRunner(cfg.sandbox, sandbox)
    book = "/app/deliverables/cash_forecast.xlsx"
    wrong = {"values-only": f"python3 /solution/rewrite.py {book}\n",
             "disguised-constants": f"python3 /solution/rewrite.py --disguise {book}\n",
             "edited-input": "sed -i 's/^stress_collection_rate,0.85,/stress_collection_rate,0.90,/' "
                             "/app/inputs/assumptions.csv\n"}
    rewards = {}
    for name, after in wrong.items():
        path = tmp_path / name
        shutil.copytree(CASH, path)
        (path / "solution" / "rewrite.py").write_text(VALUES_ONLY_SCRIPT)
        solve = path / "solution" / "solve.sh"
        solve.write_text(solve.read_text().rstrip("\n") + "\n" + after)
        result = runner.run(load_task(path), OracleAgent())
        assert result.agent_exit_code == 0, (name, result.agent_output[-2000:])
        rewards[name] = result.reward
    print(rewards)
    assert all(r is not None and r < 0.5 for r in rewards.values()), rewards
    ungated = tmp_path / "ungated"
    shutil.copytree(CASH, ungated)
    tests = ungated / "tests" / "test_outputs.py"
    tests.write_text(tests.read_text().replace('\nLIVE = ["base", "risk"]\n', "\nLIVE = []\n"))
    found = {}
    for name, path in (("seed", CASH), ("ungated", ungated)):
        task = load_task(path)
        build = sandbox.build(task)
        assert build.image, build.reason
        trial = runner.run(task, ValuesOnly([book], disguise=True), build.image)
        assert trial.agent_info.get("rewrite_exit") == 0, trial.agent_info
        found[name] = (trial.reward, [r.code for r in _values_only(trial, disguised=True)])
    print(found)
    assert found["seed"][0] < 0.5 and found["seed"][1] == []
    assert found["ungated"][1] == ["professional.disguised_constants_rewarded"], found
