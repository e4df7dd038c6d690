"""The judge behind ``ask_human``: the model judge against a real client replaying recorded API
responses (tests/test_model_clients.py's replay server), which model it is in every mode
(``hil.judge_model``, default the proposer's, never silently the solver), and the keyword judge's
guard against keyword stuffing. No Docker."""

from __future__ import annotations

import copy
import json

import pytest

from aes.config import ConfigError, compose_config
from aes.hil.blockers import load_blockers
from aes.hil.human import NEUTRAL, KeywordJudge, ModelJudge, SimulatedHuman
from tests.test_hil import hil_task
from tests.test_model_clients import KEY_ENV, ReplayServer, recorded


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-123")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    srv = ReplayServer()
    srv.thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def says(text: str) -> dict:
    """A recorded Messages API response, its text replaced."""
    envelope = copy.deepcopy(recorded("anthropic_max_tokens"))
    envelope["body"]["content"] = [{"type": "text", "text": text}]
    envelope["body"]["stop_reason"] = "end_turn"
    return envelope


def judge_overrides(server: ReplayServer, *extra: str) -> list[str]:
    return ["hil.judge=model", "proposer=claude", f"proposer.base_url={server.url}",
            f"proposer.api_key_env={KEY_ENV}", "proposer.max_retries=0", *extra]


def test_the_model_judge_reads_a_recorded_reply_and_never_sends_the_answers(server, tmp_path):
    from aes.models import build_model

    cfg = compose_config(judge_overrides(server))
    blockers = load_blockers(hil_task(tmp_path))
    judge = ModelJudge(build_model(cfg.proposer), "You judge questions.")
    server.push(says('["B2"]'), says('Both fit: ["B1", "B7"]'), says("I cannot tell."), says('["B1", oops]'))
    assert judge.match("Which currency do we bill in?", blockers) == ["B2"]
    assert judge.match("What are the fee and the penalty?", blockers) == ["B1"]  # an unknown id is dropped
    assert judge.match("What is the weather?", blockers) == []  # no JSON list: none
    assert judge.match("Anything?", blockers) == []  # not JSON: none
    first = server.bodies[0]
    sent = json.dumps(first)
    assert first["system"] == "You judge questions." or "You judge questions." in json.dumps(first["system"])
    assert "billing currency" in sent and "Which currency do we bill in?" in sent
    for secret in ("EUR", "USD", "2.5", '"1.5"'):  # answers and alternatives never leave aes
        assert secret not in sent, secret


def test_the_human_answers_what_the_model_judge_matched(server, tmp_path):
    from aes.models import build_model

    cfg = compose_config(judge_overrides(server))
    human = SimulatedHuman(load_blockers(hil_task(tmp_path)), ModelJudge(build_model(cfg.proposer), "judge"))
    server.push(says('["B2"]'), says("[]"))
    assert human.ask("Which currency?") == "billing currency: EUR"
    assert human.ask("How do I run the tests?") == NEUTRAL
    assert [e["matched"] for e in human.log] == [["B2"], []]


@pytest.mark.parametrize("mode", ["eval", "rollout", "calibrate"])
def test_every_solver_mode_gets_the_model_judge(server, tmp_path, mode):
    """mode=eval/rollout/calibrate build no proposer: the judge is the proposer config's model,
    health-checked with the solver."""
    from aes.modes import solver_session

    cfg = compose_config(judge_overrides(server, f"mode={mode}", "solver=scripted", "sandbox=simulated"))
    server.push("anthropic_models")  # the health check
    with solver_session(cfg, tmp_path) as runner:
        assert isinstance(runner.hil.judge, ModelJudge) and runner.hil.judge.model.config.name == "claude"
    assert server.requests and "/models" in server.requests[0]["path"]


def test_mode_generate_judges_with_its_live_proposer(server, tmp_path):
    from aes.models import build_model
    from aes.modes import solver_session

    cfg = compose_config(judge_overrides(server, "mode=generate", "solver=scripted", "sandbox=simulated"))
    proposer = build_model(cfg.proposer)
    server.push("anthropic_models")
    with solver_session(cfg, tmp_path, None, proposer) as runner:
        assert runner.hil.judge.model is proposer


def test_the_judge_is_never_silently_the_solver(tmp_path, monkeypatch):
    from aes.compose import build_judge_model
    from aes.models import RunBudget, build_model

    cfg = compose_config(["hil.judge=model", "solver=scripted", "proposer=scripted", "proposer.name=scripted"])
    assert cfg.proposer == cfg.solver
    solver = build_model(cfg.solver)
    with pytest.raises(ConfigError, match="proposer@hil.judge_model"):
        build_judge_model(cfg, RunBudget(), solver)
    shared = compose_config(["hil.judge=model", "solver=scripted", "proposer=claude"])
    with pytest.raises(ConfigError, match="the solver"):  # a shared policy: the live proposer is the solver
        build_judge_model(shared, RunBudget(), solver, proposer=solver)
    chosen = compose_config(["hil.judge=model", "solver=scripted", "proposer=scripted", "proposer.name=scripted",
                             "proposer@hil.judge_model=claude"])
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-123")  # built, never called
    model, owned = build_judge_model(chosen, RunBudget(), solver)
    assert owned and model.config.name == "claude"
    model.close()


def test_a_flywheel_with_a_shared_policy_needs_a_judge_model(tmp_path):
    from aes.compose import build_flywheel

    cfg = compose_config(["experiment=simulated", "hil.judge=model", "flywheel.shared_policy=true"])
    with pytest.raises(ConfigError, match="proposer@hil.judge_model"):
        build_flywheel(cfg, tmp_path)


# -- the keyword judge against keyword stuffing ------------------------------------------------

STUFFING = [
    {"id": f"B{i}", "type": "question", "topic": topic, "keywords": [word], "answer": f"answer {i}",
     "alternative": f"other {i}"}
    for i, (topic, word) in enumerate([("late fee rate", "fee"), ("grace period", "grace"),
                                       ("fee cap", "cap"), ("billing currency", "currency")], start=1)
]


def _stuffed_human(tmp_path):
    path = hil_task(tmp_path, blockers=STUFFING)
    return SimulatedHuman(load_blockers(path), KeywordJudge())


def test_a_question_naming_every_topic_reveals_nothing(tmp_path):
    human = _stuffed_human(tmp_path)
    assert human.ask("Tell me the fee, the grace period, the cap and the currency.") == NEUTRAL
    assert human.log[-1]["matched"] == [] and human.log[-1]["too_broad"] == ["B1", "B2", "B3", "B4"]
    assert human.revealed == set()


def test_a_question_about_one_or_two_topics_is_answered(tmp_path):
    human = _stuffed_human(tmp_path)
    assert human.ask("What grace period applies?") == "grace period: answer 2"
    reply = human.ask("What are the fee and the currency?")
    assert "answer 1" in reply and "answer 4" in reply and human.revealed == {"B1", "B2", "B4"}
