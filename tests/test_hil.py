"""Human-in-the-loop tasks: the blocker registry, the three settings, the simulated human, Ask-F1,
admission (every blocker must matter) and ask_human inside a real trial."""

from __future__ import annotations

import json

import pytest

from aes.hil.blockers import BlockerError, load_blockers
from aes.hil.human import NEUTRAL, KeywordJudge, SimulatedHuman
from aes.hil.metrics import ask_scores, summarize
from aes.hil.settings import instruction_for
from tests.conftest import make_task

BLOCKERS = [
    {"id": "B1", "type": "missing_parameters", "topic": "late fee percentage", "keywords": ["late fee percentage", "penalty"],
     "answer": "1.5", "alternative": "2.5"},
    {"id": "B2", "type": "business_information", "topic": "billing currency", "keywords": ["billing currency", "bill currency"],
     "answer": "EUR", "alternative": "USD"},
]
SOLVE = ("python3 -c \"import json; a = json.load(open('/solution/answers.json')); "
         "open('/app/out.txt', 'w').write(a['B1'] + ' ' + a['B2'])\"\n")
TEST = """#!/bin/bash
got=$(cat /app/out.txt 2>/dev/null)
passed=0
[ "${got%% *}" = "1.5" ] && passed=$((passed+1))
[ "${got##* }" = "{second}" ] && passed=$((passed+1))
python3 -c "print($passed / 2)" > /logs/verifier/reward.txt
"""


def hil_task(root, name="hil", blockers=BLOCKERS, second="EUR"):
    """A small HiL task: the fee and the currency are withheld; the tests check both (or, with
    ``second="1.5"``... the fee twice, ignoring the currency)."""
    test = TEST.replace("{second}", second) if second != "fee" else TEST.replace('"${got##* }" = "{second}"',
                                                                                 '"${got%% *}" = "1.5"')
    path = make_task(root, name, solve=SOLVE, test=test,
                     instruction="Write the late fee and the currency of overdue invoices to /app/out.txt.\n")
    (path / "blockers.json").write_text(json.dumps(blockers))
    (path / "solution" / "answers.json").write_text(json.dumps({b["id"]: b["answer"] for b in blockers}))
    return path


def test_the_registry_is_checked(tmp_path):
    path = hil_task(tmp_path)
    assert [b.id for b in load_blockers(path)] == ["B1", "B2"]
    (path / "solution" / "answers.json").write_text(json.dumps({"B1": "2"}))
    with pytest.raises(BlockerError, match="answers.json") as err:
        load_blockers(path)
    assert err.value.code == "hil.answers_mismatch"
    (path / "blockers.json").write_text(json.dumps([{**BLOCKERS[0], "type": "whim"}]))
    with pytest.raises(BlockerError) as err:
        load_blockers(path)
    assert err.value.code == "hil.blocker_type"


@pytest.mark.parametrize("change, code, words", [
    (lambda b: b.pop("alternative"), "hil.no_alternative", "alternative"),
    (lambda b: b.update(alternative="EUR"), "hil.alternative_same", "equals"),
    (lambda b: b.update(guess=""), "hil.blocker_invalid", "guess"),
    (lambda b: b.update(alternate="USD"), "hil.blocker_invalid", "alternate"),
])
def test_every_blocker_declares_a_parseable_alternative(tmp_path, change, code, words):
    """The alternative answer (what admission runs the reference with) is required and differs from
    the answer; a guess, when given, is a non-empty string; a misspelt field is an error."""
    path = hil_task(tmp_path)
    blockers = json.loads((path / "blockers.json").read_text())
    change(blockers[1])
    (path / "blockers.json").write_text(json.dumps(blockers))
    with pytest.raises(BlockerError, match=words) as err:
        load_blockers(path)
    assert err.value.code == code and "B2" in str(err.value)


def test_the_guess_defaults_to_the_alternative(tmp_path):
    path = hil_task(tmp_path, blockers=[BLOCKERS[0], {**BLOCKERS[1], "guess": "EUR"}])
    first, second = load_blockers(path)
    assert (first.guessed, second.guessed) == ("2.5", "EUR")
    assert "alternative" not in first.public() and "guess" not in second.public() and "answer" not in first.public()


def test_the_seed_registries_load():
    from tests.test_hil_compat import HIL_SEED_NAMES, HIL_SEEDS

    for name in HIL_SEED_NAMES:
        assert all(b.alternative and b.alternative != b.answer for b in load_blockers(HIL_SEEDS / name)), name


def test_the_task_reward_and_the_training_reward_of_an_attempt():
    """extra.reward is the task reward; the shaped one only trains. Files written before the shaped
    reward had its own key (reward = shaped, reward_task = task) read the same way."""
    from aes.rewards import task_reward, training_reward

    now, before, plain = {"reward": 0.5, "reward_shaped": 1.0}, {"reward": 1.0, "reward_task": 0.5}, {"reward": 0.5}
    assert [task_reward(e) for e in (now, before, plain)] == [0.5, 0.5, 0.5]
    assert [training_reward(e) for e in (now, before, plain)] == [1.0, 1.0, 0.5]
    assert task_reward({"reward": None}) is None and training_reward({"reward": None}) is None


def test_three_settings_without_model_calls(tmp_path):
    blockers = load_blockers(hil_task(tmp_path))
    full = instruction_for("full_info", "Do it.", blockers)
    assert "late fee percentage: 1.5" in full and "billing currency: EUR" in full
    assert instruction_for("ask_human", "Do it.", blockers) == instruction_for("no_tool", "Do it.", blockers) == "Do it."


def _human(tmp_path):
    return SimulatedHuman(load_blockers(hil_task(tmp_path)), KeywordJudge())


def test_asking_exactly_the_blockers_scores_one(tmp_path):
    human = _human(tmp_path)
    assert human.ask("What is the late fee percentage?") == "late fee percentage: 1.5"
    assert "EUR" in human.ask("Which currency do we bill in?")
    assert ask_scores(human.log, 2)["ask_f1"] == 1.0


def test_asking_nothing_scores_zero_and_no_ask_rate(tmp_path):
    assert ask_scores([], 2)["ask_f1"] == 0.0
    assert summarize([ask_scores([], 2)] * 3)["ask_rate"] == 0.0


def test_twenty_questions_one_new_hit_is_precision_one_twentieth(tmp_path):
    """Asking again about a blocker already answered reveals nothing new: it counts as a miss."""
    human = _human(tmp_path)
    assert human.ask("What is the weather like?") == NEUTRAL
    for i in range(17):
        human.ask(f"Question number {i} about nothing in particular?")
    human.ask("How large is the penalty?")
    assert human.ask("And the penalty, again?") == "late fee percentage: 1.5"  # answered again
    scores = ask_scores(human.log, 2)
    assert scores["questions"] == 20 and scores["matched_questions"] == 1
    assert scores["precision"] == pytest.approx(0.05) and scores["recall"] == 0.5
    assert scores["ask_f1"] == pytest.approx(2 * 0.05 * 0.5 / 0.55)


@pytest.mark.docker
def test_admission_admits_a_hil_task_and_names_an_unused_blocker(sandbox, cfg, tmp_path):
    from aes.admission import Validator

    validator = Validator(cfg.sandbox)
    good = validator.validate(hil_task(tmp_path, "good"))
    assert good.valid, [str(r) for r in good.reasons]
    lazy = validator.validate(hil_task(tmp_path, "lazy", second="fee"))  # the tests never look at the currency
    assert [r.code for r in lazy.reasons] == ["hil.blocker_unused"] and "B2" in lazy.reasons[0].message


@pytest.mark.docker
def test_ask_human_in_a_real_trial(sandbox, cfg, tmp_path):
    """A scripted solver asks, reads the reply and writes the answer: the question, its match and the
    reply are in the trajectory, and Ask-F1 is 1."""
    from aes.agents import TerminalAgent
    from aes.config import AgentConfig
    from aes.hil.tool import hil_attempt
    from aes.sandbox import TrialRunner
    from aes.tasks import load_task
    from tests.test_agent import Scripted, reply

    task = load_task(hil_task(tmp_path))
    model = Scripted([reply("```bash\nask_human What late fee percentage applies?\n```"),
                      reply("```bash\nask_human Which currency do we bill in?\n```"),
                      reply("```bash\necho '1.5 EUR' > /app/out.txt\n```"), reply("DONE")])
    agent = TerminalAgent(model, AgentConfig(), hil=hil_attempt(task, "ask_human", KeywordJudge()))
    result = TrialRunner(cfg.sandbox, sandbox).run(task, agent)
    assert result.reward == 1.0
    record = result.agent_info["trajectory"]["extra"]["hil"]
    assert [q["matched"] for q in record["asked"]] == [["B1"], ["B2"]] and record["ask_f1"] == 1.0
    assert "1.5" in model.seen[1][-1]["content"]  # the human's reply came back as the observation


def test_the_prompt_harnesses_can_write_a_hil_task(tmp_path):
    """The harnesses' file blocks may hold blockers.json (a file at the task root, nowhere else)."""
    from aes.proposer.files import DraftError, parse_files, write_files

    reply = "".join(f'<file path="{rel}">\n{text}</file>\n' for rel, text in [
        ("instruction.md", "Write the fee.\n"), ("blockers.json", json.dumps(BLOCKERS)),
        ("solution/answers.json", json.dumps({"B1": "1.5", "B2": "EUR"}))])
    files = parse_files(reply)
    assert set(files) == {"instruction.md", "blockers.json", "solution/answers.json"}
    write_files(files, tmp_path / "draft")
    assert json.loads((tmp_path / "draft" / "blockers.json").read_text()) == BLOCKERS
    for bad in ("blockers.json/x", "instruction.md/x", "environment", "answers.json"):
        with pytest.raises(DraftError):
            parse_files(f'<file path="{bad}">x</file>')


def _static_validator(*overrides):
    """Admission as ``domain=hil`` configures it; the trials never run (static checks stop first)."""
    from aes.compose import build_trials, make_validator
    from aes.config import compose_config

    cfg = compose_config(["sandbox=simulated", *overrides])
    return make_validator(cfg, build_trials(cfg))


def test_a_hil_draft_without_a_registry_is_rejected(tmp_path):
    path = hil_task(tmp_path)
    (path / "blockers.json").unlink()
    report = _static_validator("domain=hil").validate(path)
    assert [r.code for r in report.reasons] == ["hil.no_registry"] and "domain.blocker_registry" in str(report.reasons[0])
    assert "build" not in report.timings


def test_a_bad_registry_is_a_static_reason_before_the_build(tmp_path):
    path = hil_task(tmp_path, blockers=[{**BLOCKERS[0], "type": "whim"}, BLOCKERS[1]])
    for overrides in (["domain=hil"], []):  # a registry is checked wherever one is present
        report = _static_validator(*overrides).validate(path)
        assert [r.code for r in report.reasons] == ["hil.blocker_type"] and "build" not in report.timings


@pytest.mark.docker
def test_eval_reports_a_bad_registry_per_task_and_goes_on(sandbox, tmp_path):
    """mode=eval over a good HiL task and one whose registry does not load: the bad one is an error
    row naming the reason, the good one is attempted, and the eval finishes."""
    from aes.config import compose_config
    from aes.modes import evaluate

    tasks = tmp_path / "tasks"
    hil_task(tasks, "good")
    hil_task(tasks, "bad", blockers=[BLOCKERS[0], {**BLOCKERS[1], "alternative": "EUR"}])
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    cfg = compose_config(["mode=eval", "domain=hil", f"tasks={tasks}", "solver=scripted", "k=1"])
    assert evaluate(cfg, run_dir)
    scores = {t["task"]: t for t in json.loads((run_dir / "eval.json").read_text())["tasks"]}
    assert scores["test/good"]["rewards"] == [0.0] and scores["test/good"]["error"] is None
    assert scores["test/bad"]["rewards"] == [] and "hil.alternative_same" in scores["test/bad"]["error"]


def test_the_table4_sweep_runs_in_the_whole_hil_domain():
    """The sweep picks conf/domain/hil.yaml (its registry rule, no terminal-bench decontamination
    index), not the terminal domain renamed."""
    from aes.config.load import load_config
    from tests.test_config import compose_sweep

    for setting in ("full_info", "ask_human", "no_tool"):
        cfg = load_config(compose_sweep("table4_hil_settings", [f"hil.setting={setting}", "tasks=x"]))
        assert (cfg.mode, cfg.hil.setting, cfg.domain.name) == ("eval", setting, "hil")
        assert cfg.domain.blocker_registry and cfg.domain.decontam_index is None
