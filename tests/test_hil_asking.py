"""Ask-F1 measures asking, not guessing words (issue 25): on every HiL seed a scripted agent that asks
only generic questions scores Ask-F1 <= 0.2 and one that asks one specific question per blocker
scores 1.0; asking again about an answered blocker costs precision; keywords that a generic
question or one sentence of the instruction would hit are rejected at admission. No Docker, no
model: the keyword judge (the model judge's tests are in tests/test_hil_judge.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from aes.hil.blockers import load_blockers, registry_reasons
from aes.hil.cues import GENERIC_QUESTIONS, words
from aes.hil.human import NEUTRAL, KeywordJudge, SimulatedHuman
from aes.hil.metrics import ask_scores

SEEDS = Path(__file__).resolve().parents[1] / "aes" / "domains" / "hil" / "seeds"
SEED_DIRS = sorted(p for p in SEEDS.iterdir() if (p / "blockers.json").is_file())

GENERIC = [
    # none of these is in the admission bank (aes.hil.cues.GENERIC_QUESTIONS): they show the rule
    # holds beyond the questions admission tries
    "What amount should be used?", "Is there an upper bound?", "When is this due?", "What number should I put?",
    "Could you share more details?", "What exactly do you want?", "Which approach is preferred?",
    "What value is expected?", "How precise should it be?", "Anything I should watch out for?",
    "What about special cases?", "What time frame?", "Which records matter?", "Is the data complete?",
    "Which file should I edit?", "How often?", "Should I include everything?", "What is the expected output?",
    "Are the inputs correct?", "Is the request up to date?", "How much is it per month?", "What is the maximum?",
    "Any deadlines I should know about?", "What is the cutoff?", "How should ties be broken?",
]
SPECIFIC = {
    "churn-risk-report": {
        "B1": "Which subscription statuses count as paying customers?",
        "B2": "How many days without a login before a customer counts as at risk?",
        "B3": "What should days_inactive be for customers who never logged in?",
        "B4": "In what order should the report rows be sorted?",
    },
    "config-migration": {
        "B1": "Is server.request_timeout in milliseconds or seconds in v2?",
        "B2": "Should the legacy export_path be dropped or moved to exports.path?",
        "B3": "What should happen to unknown v1 settings that v2 does not define?",
        "B4": "What is the platform default database pool size?",
    },
    "fiscal-quarter-revenue": {
        "B1": "When does fiscal year 2026 start?",
        "B2": "Is revenue gross_cents minus the discount, and does tax count?",
        "B3": "Which date puts an order in a quarter: ordered_at or shipped_at?",
        "B4": "Should a region with no revenue in a quarter get a row with 0?",
    },
    "late-fee-policy": {
        "B1": "What is the late fee rate per month?",
        "B2": "How many days is the grace period?",
        "B3": "Does a partial month of lateness count as a full month?",
        "B4": "docs/terms.md says the cap is USD 40.00 but the request says 8%: which cap applies?",
    },
    "rate-limiter": {
        "B1": "How many requests per window does each plan allow?",
        "B2": "Does the limit apply per account or per API key?",
        "B3": "Is it a sliding window or a fixed window?",
        "B4": "Do rejected requests count toward the limit?",
    },
    "support-sla-breaches": {
        "B1": "What is the first-response target in minutes for each priority?",
        "B2": "The data dictionary says 4 is urgent, the request says 1: which priority numbering is right?",
        "B3": "Does a bot auto-reply count as the first response?",
        "B4": "Should tickets of internal customers be left out?",
    },
}


def _asked(path: Path, questions: list[str]) -> tuple[SimulatedHuman, dict]:
    blockers = load_blockers(path)
    human = SimulatedHuman(blockers, KeywordJudge())
    for question in questions:
        human.ask(question)
    return human, ask_scores(human.log, len(blockers))


def test_the_seeds_cover_every_blocker_with_a_specific_question():
    assert {p.name for p in SEED_DIRS} == set(SPECIFIC) and len(SEED_DIRS) >= 6
    for path in SEED_DIRS:
        assert set(SPECIFIC[path.name]) == {b.id for b in load_blockers(path)}, path.name


@pytest.mark.parametrize("path", SEED_DIRS, ids=lambda p: p.name)
def test_generic_questions_score_at_most_one_fifth(path):
    human, scores = _asked(path, GENERIC)
    assert scores["questions"] == len(GENERIC)  # every question was asked and judged
    assert scores["ask_f1"] <= 0.2, [e for e in human.log if e["matched"]]


@pytest.mark.parametrize("path", SEED_DIRS, ids=lambda p: p.name)
def test_one_specific_question_per_blocker_scores_one(path):
    human, scores = _asked(path, list(SPECIFIC[path.name].values()))
    assert [e["matched"] for e in human.log] == [[b] for b in SPECIFIC[path.name]], human.log
    assert scores["ask_f1"] == 1.0


@pytest.mark.parametrize("path", SEED_DIRS, ids=lambda p: p.name)
def test_the_admission_bank_and_the_instruction_reveal_nothing(path):
    """What admission checks (hil.unspecific_keywords): no generic question of the bank and no
    sentence of the instruction, asked back as a question, reveals a blocker."""
    from aes.hil.cues import sentences

    assert registry_reasons(path) == []
    instruction = (path / "instruction.md").read_text()
    asked = list(GENERIC_QUESTIONS) + [f"About this: {s} Can you clarify?" for s in sentences(instruction)]
    human, scores = _asked(path, asked)
    assert scores["revealed"] == 0, [e for e in human.log if e["matched"]]


def test_asking_again_about_an_answered_blocker_costs_precision():
    path = SEEDS / "late-fee-policy"
    question = SPECIFIC["late-fee-policy"]["B2"]
    human, scores = _asked(path, [question] * 10)
    assert [bool(e["new"]) for e in human.log] == [True] + [False] * 9
    assert all(e["reply"] != NEUTRAL for e in human.log)  # the human still answers
    assert scores["precision"] == pytest.approx(0.1) and scores["recall"] == 0.25
    once, _ = _asked(path, [question])
    assert ask_scores(once.log, 4)["precision"] == 1.0


def test_an_off_topic_question_with_a_blockers_word_reveals_nothing():
    """A single word of a cue is not the cue: "window" alone, "days" alone, "cap" alone."""
    for seed, question in (("rate-limiter", "What window of the terminal should I use?"),
                           ("late-fee-policy", "How many days did the export take?"),
                           ("late-fee-policy", "Should I cap my line length at 80?")):
        human, scores = _asked(SEEDS / seed, [question])
        assert scores["revealed"] == 0, human.log


def test_words_are_compared_without_case_plurals_and_stop_words():
    assert words("How many Days is the GRACE period?") == {"day", "grace", "period"}
    assert words("docs/terms.md and request_timeout") >= {"term", "md", "request", "timeout", "doc"}
    assert words("Which statuses?") == {"status"}


def _registry_with(tmp_path: Path, seed: str, blocker: str, keywords: list[str]) -> Path:
    path = tmp_path / seed
    shutil.copytree(SEEDS / seed, path)
    registry = json.loads((path / "blockers.json").read_text())
    for item in registry:
        if item["id"] == blocker:
            item["keywords"] = keywords
    (path / "blockers.json").write_text(json.dumps(registry))
    return path


@pytest.mark.parametrize("keywords, why", [
    (["how much"], "no word beyond stop"),
    (["percentage"], "generic question 'What percentage?'"),
    (["grace period"], "all words of the instruction's"),
    ([], "has no keywords"),
])
def test_keywords_that_do_not_single_out_their_blocker_are_rejected(tmp_path, keywords, why):
    path = _registry_with(tmp_path, "late-fee-policy", "B2", keywords)
    reasons = registry_reasons(path)
    assert [r.code for r in reasons] == ["hil.unspecific_keywords"] and why in reasons[0].message
    assert "B2" in reasons[0].message


def test_the_viewer_shows_each_questions_judgment():
    from aes.report.viewer import _hil

    path = SEEDS / "late-fee-policy"
    human, scores = _asked(path, [SPECIFIC["late-fee-policy"]["B2"], SPECIFIC["late-fee-policy"]["B2"], "How much?"])
    page = _hil({"setting": "ask_human", "asked": human.log, **scores})
    assert "How many days is the grace period?" in page and "B2 (asked before)" in page
    assert "How much?" in page and "none" in page and "ask_f1" in page


def test_the_judge_defaults_to_the_model_wherever_one_is_configured():
    """hil.judge=auto: the model judge when hil.judge_model is chosen or the proposer is served by an
    API or a server and is not the solver; the keyword judge for the embedded, tiny and scripted
    models and a shared policy."""
    from aes.compose import judge_kind
    from aes.config import compose_config

    assert compose_config([]).hil.judge == "auto"
    assert judge_kind(compose_config([])) == "keyword"  # the embedded model proposes and solves
    assert judge_kind(compose_config(["proposer=claude", "solver=qwen"])) == "model"
    assert judge_kind(compose_config(["proposer=claude", "solver=qwen", "flywheel.shared_policy=true"])) == "keyword"
    assert judge_kind(compose_config(["proposer=scripted", "solver=qwen"])) == "keyword"
    assert judge_kind(compose_config(["proposer@hil.judge_model=claude"])) == "model"
    assert judge_kind(compose_config(["proposer=claude", "solver=qwen", "hil.judge=keyword"])) == "keyword"
