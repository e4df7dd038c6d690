"""Every attempt ends with a verdict: the outcome table, the reward parsers and admission's judgement
have no input that raises (fuzzed), and an error of aes on one task is that task's verdict."""

from __future__ import annotations

import json
import math
from enum import Enum
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aes.admission import Validator, validate_all
from aes.admission.pipeline import AdmissionPipeline
from aes.admission.validate import ValidationReport, _trial_reasons
from aes.config import AdmissionConfig
from aes.rollout.runner import attach_result
from aes.sandbox.trial import (
    AGENT,
    AGENT_BROKE,
    INFRA,
    INFRASTRUCTURE,
    OUTCOME_KINDS,
    REWARDED,
    TASK,
    Outcome,
    TrialResult,
    admission_code,
    outcome_kind,
    parse_reward_json,
    parse_reward_txt,
    printable,
)
from aes.tasks import Reason
from tests.conftest import make_task


# -- the outcome table ------------------------------------------------------------------------------
@pytest.mark.parametrize("outcome", list(Outcome))
def test_every_outcome_has_a_kind_an_admission_reason_and_a_rollout_score(outcome):
    kind = outcome_kind(outcome)
    assert kind in (REWARDED, AGENT, TASK, INFRA)
    assert (outcome in AGENT_BROKE) == (kind == AGENT) and (outcome in INFRASTRUCTURE) == (kind == INFRA)
    code = admission_code(outcome)
    assert code and "." not in code
    trial = TrialResult(task="t", agent="oracle", outcome=outcome, reward=1.0 if kind == REWARDED else None)
    for stage in ("oracle", "nop"):
        reasons = _trial_reasons(stage, trial)
        assert all(r.code.startswith(f"{stage}.") for r in reasons)
    if outcome not in (Outcome.OK, Outcome.AGENT_TIMEOUT):
        assert _trial_reasons("oracle", trial) == [Reason(f"oracle.{code}", "")]
    extra = attach_result(trial, "env", "solver", 0)["extra"]
    assert extra["outcome"] == outcome.value
    assert extra["reward"] == {REWARDED: 1.0, AGENT: 0.0, TASK: None, INFRA: None}[kind]


def test_an_outcome_missing_from_the_table_scores_zero_and_is_a_reason():
    """A new outcome (e.g. ``tampered``) needs one enum line: unlisted, it is the agent's doing."""
    Extra = Enum("Extra", {"TAMPERED": "tampered"}, type=str)
    assert Extra.TAMPERED not in OUTCOME_KINDS
    assert outcome_kind(Extra.TAMPERED) == AGENT and admission_code(Extra.TAMPERED) == "tampered"
    trial = TrialResult(task="t", agent="oracle", outcome=Extra.TAMPERED, detail="read /app/x.py as code")
    assert _trial_reasons("oracle", trial) == [Reason("oracle.tampered", "read /app/x.py as code")]


@settings(max_examples=300, deadline=None)
@given(oracle=st.sampled_from(list(Outcome)), nop=st.sampled_from(list(Outcome)),
       oracle_reward=st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
       nop_reward=st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
       tests=st.one_of(st.none(), st.floats(min_value=0, max_value=1e6)))
def test_admission_judges_every_pair_of_outcomes(oracle, nop, oracle_reward, nop_reward, tests, cfg):
    validator = Validator(cfg.sandbox, runner=object())
    o = TrialResult("t", "oracle", oracle, reward=oracle_reward, timings={} if tests is None else {"tests": tests})
    n = TrialResult("t", "nop", nop, reward=nop_reward)
    reasons = validator._judge(o, n)
    assert all(isinstance(r, Reason) and r.code.split(".")[0] in ("oracle", "nop", "build") for r in reasons)
    valid = not reasons
    if valid:
        assert oracle_reward == 1.0 and oracle in (Outcome.OK, Outcome.AGENT_TIMEOUT)
        assert nop_reward is None or nop is not Outcome.OK or nop_reward < 0.5


# -- the reward parsers -----------------------------------------------------------------------------
def _only_value_error(parse, data: bytes) -> dict | None:
    try:
        out = parse(data)
    except ValueError as exc:
        assert str(exc)
        return None
    assert "reward" in out and all(isinstance(v, float) and math.isfinite(v) for v in out.values())
    return out


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=4096))
def test_reward_parsers_raise_nothing_but_value_error_on_any_bytes(data):
    _only_value_error(parse_reward_json, data)
    _only_value_error(parse_reward_txt, data)


_JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
                     lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner,
                                                                                            max_size=4)),
                     max_leaves=20)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.text(max_size=10), _JSON, max_size=5), st.one_of(st.none(), _JSON))
def test_reward_json_is_a_flat_object_of_finite_numbers(obj, reward):
    if reward is not None:
        obj = {**obj, "reward": reward}
    text = json.dumps(obj, allow_nan=True)
    out = _only_value_error(parse_reward_json, text.encode())
    flat = "reward" in obj and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                                   for v in obj.values())
    assert (out is not None) == flat


@pytest.mark.parametrize("data", [
    b"[" * 200_000 + b"]" * 200_000,                     # deeper than the parser's recursion
    b'{"reward": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"reward": 1' + b"0" * 5000 + b"}",                 # more digits than Python converts
    b'{"reward": 1e400}', b'{"reward": NaN}', b'{"reward": -Infinity}', b'{"reward": true}',
    b'[1.0]', b'"1.0"', b"1.0", b"\xff\xfe{\x00}", b'\xef\xbb\xbf{"reward": 1}', b"", b"null",
    b'{"reward": 1, "detail": {"a": 1}}', b'{"reward": "1"}',
])
def test_malformed_reward_json_is_a_reason(data):
    with pytest.raises(ValueError):
        parse_reward_json(data)


@pytest.mark.parametrize("data", [b"nan", b"inf", b"-Infinity", b"\xff", b"1 2", b"", b"1e999", b"0x1"])
def test_malformed_reward_txt_is_a_reason(data):
    with pytest.raises(ValueError):
        parse_reward_txt(data)


def test_an_integer_beyond_a_float_is_a_reason_not_an_overflow():
    with pytest.raises(ValueError, match="too large"):
        parse_reward_json(b'{"reward": 1' + b"0" * 400 + b"}")


# -- names that are not UTF-8 -----------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_printable_makes_any_file_name_encodable(raw):
    name = raw.decode("utf-8", "surrogateescape")
    shown = printable({"carried": [f"/app/{name}"], name: name})
    json.dumps(shown, ensure_ascii=False).encode("utf-8")
    if raw.decode("utf-8", "replace") == name:
        assert shown == {"carried": [f"/app/{name}"], name: name}


def test_printable_shows_the_bytes_of_a_name():
    assert printable("/app/\udcff\udcfe.txt") == "/app/\\xff\\xfe.txt"


# -- an error of aes on one task is that task's verdict -----------------------------------------------
class _Broken:
    """A sandbox whose build raises what no path of aes should (a bug), to show the net holds."""

    def build(self, task):
        raise KeyError("a bug in aes")


class _Runner:
    sandbox = _Broken()


def test_an_error_of_aes_on_one_task_is_its_reason_and_the_batch_goes_on(cfg, tmp_path):
    tasks = [make_task(tmp_path, "a"), tmp_path / "missing", make_task(tmp_path, "b")]
    reports = validate_all(Validator(cfg.sandbox, runner=_Runner()), tasks, concurrency=2, show_progress=False)
    assert [Path(r.task).name for r in reports] == ["a", "missing", "b"]
    assert [r.reasons[0].code for r in reports] == ["internal.error", "static.layout.not_a_directory", "internal.error"]
    assert "KeyError" in reports[0].reasons[0].message and not any(r.valid for r in reports)


def test_an_error_of_aes_in_admission_rejects_the_draft(cfg, tmp_path):
    class Decontam:
        def check(self, instruction):
            raise RuntimeError("a bug in decontamination")

    class Passing:
        cfg = None

        def validate(self, path):
            return ValidationReport(task=str(path), valid=True)

    Passing.cfg = cfg.sandbox
    verdict = AdmissionPipeline(Passing(), Decontam(), None, None).admit(make_task(tmp_path), "env-1")
    assert verdict.outcome == "broken" and verdict.reasons[0].code == "internal.error"
    assert "RuntimeError" in verdict.reasons[0].message


# -- admission's time bounds --------------------------------------------------------------------------
def test_the_do_nothing_runs_test_time_follows_the_references(cfg, tmp_path):
    from aes.tasks import load_task

    bounds = AdmissionConfig(nop_verifier_factor=3.0, nop_verifier_floor_sec=60.0, max_verifier_sec=900.0)
    validator = Validator(cfg.sandbox, runner=object(), admission=bounds)
    toml = '[verifier]\ntimeout_sec = 3000\n[agent]\ntimeout_sec = 9000\n[environment]\nbuild_timeout_sec = 3000\n'
    task, notes = validator._bounded(load_task(make_task(tmp_path, toml=toml)))
    assert (task.spec.verifier_timeout_sec, task.spec.agent_timeout_sec, task.spec.build_timeout_sec) == (900, 900, 900)
    assert len(notes) == 3 and "admission.max_reference_sec" in notes[1]
    assert validator._nop_bound(task, None) == 60.0
    assert validator._nop_bound(task, 100.0) == 300.0
    assert validator._nop_bound(task, 1000.0) == 900.0  # never past the task's own timeout


def test_a_draft_with_names_that_are_not_utf8_and_a_pipe_is_stored(tmp_path):
    """A proposer's container can leave any name and any file type in its draft: the pool stores it
    (pipes and devices left out) instead of stopping the generation."""
    import os

    from aes.pool import PoolStore

    draft = make_task(tmp_path, "draft")
    env_dir = os.fsencode(draft / "environment")
    Path(os.fsdecode(os.path.join(env_dir, b"\xff\xfe.txt"))).write_text("x")
    os.symlink("/etc/shadow", os.path.join(env_dir, b"link-\xff"))
    os.mkfifo(draft / "environment" / "pipe")
    store = PoolStore(tmp_path / "pool")
    env, created = store.add(draft, name="t/draft")
    assert created and store.add(draft, name="t/draft") == (env, False)
    kept = sorted(os.listdir(os.fsencode(Path(env.path) / "environment")))
    assert kept == [b"Dockerfile", b"link-\xff", b"\xff\xfe.txt"]
