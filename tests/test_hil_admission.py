"""Admission of human-in-the-loop tasks in real Docker trials: every blocker must matter, decided
by the tests alone (aes/hil/admission.py).

The packaged seeds are admitted; a seed variant whose tests ignore a text-valued blocker is
rejected naming it; a reference that cannot read an alternative answer, or a run that gives no
reward, is an error of its own and never counts as "the blocker matters"."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import make_task
from tests.test_hil_compat import HIL_SEED_NAMES, HIL_SEEDS

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def validator(cfg):
    from aes.admission import Validator

    return Validator(cfg.sandbox)


@pytest.mark.parametrize("seed", HIL_SEED_NAMES)
def test_every_hil_seed_is_admitted(validator, seed):
    report = validator.validate(HIL_SEEDS / seed)
    assert report.valid, [str(r) for r in report.reasons]


def test_a_seed_whose_tests_ignore_a_text_blocker_is_rejected_naming_it(validator, tmp_path):
    """config-migration with tests that no longer look at ``extra`` (blocker B3, whether v1 settings
    the v2 format lacks are carried): the reference with B3's alternative ("drop them") still scores
    1, so B3 is unused; the other blockers still matter."""
    task = tmp_path / "config-migration"
    shutil.copytree(HIL_SEEDS / "config-migration", task)
    tests = task / "tests" / "test_outputs.py"
    text = tests.read_text()
    edits = [
        ('def test_settings_outside_the_format(migrated):\n    assert migrated and all(d is not None for d in '
         'migrated.values())\n    assert {n: d.get("extra") for n, d in migrated.items()} == \\\n        {n: d.get("extra") '
         'for n, d in EXPECTED["app"].items()}\n\n\n', ""),
        ('assert migrated == EXPECTED["app"]', 'assert without_extra(migrated) == without_extra(EXPECTED["app"])'),
        ('assert got == EXPECTED["hidden"]', 'assert without_extra(got) == without_extra(EXPECTED["hidden"])'),
        ('@pytest.fixture(scope="module")\ndef migrated', 'def without_extra(docs):\n    return {n: {k: v for k, v in '
         '(d or {}).items() if k != "extra"} for n, d in docs.items()}\n\n\n@pytest.fixture(scope="module")\ndef migrated'),
    ]
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    tests.write_text(text)
    report = validator.validate(task)
    assert [r.code for r in report.reasons] == ["hil.blocker_unused"], [str(r) for r in report.reasons]
    assert "blocker B3" in report.reasons[0].message and "drop them" in report.reasons[0].message


STRICT_SOLVE = """#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import json, re
answers = json.load(open("/solution/answers.json"))
if not re.fullmatch(r"[A-Z]{3}", answers["B1"]):
    raise SystemExit(f"cannot read the answer {answers['B1']!r}")
open("/app/out.txt", "w").write(answers["B1"])
PY
"""
CURRENCY_TEST = """#!/bin/bash
got=$(cat /app/out.txt 2>/dev/null)
{wrong}
[ "$got" = "EUR" ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
"""


def _currency_task(root, name, alternative, test):
    path = make_task(root, name, solve=STRICT_SOLVE, test=test,
                     instruction="Write the currency we bill in to /app/out.txt.\n")
    blockers = [{"id": "B1", "type": "business_information", "topic": "billing currency",
                 "keywords": ["billing currency"], "answer": "EUR", "alternative": alternative}]
    (path / "blockers.json").write_text(json.dumps(blockers))
    (path / "solution" / "answers.json").write_text(json.dumps({"B1": "EUR"}))
    return path


def test_a_reference_that_cannot_read_the_alternative_is_an_error(validator, tmp_path):
    """The reference stops on "euro" (it reads three capitals): the tests never saw another result,
    so nothing shows the blocker matters."""
    report = validator.validate(_currency_task(tmp_path, "strict", "euro", CURRENCY_TEST.replace("{wrong}", "")))
    codes = [r.code for r in report.reasons]
    assert codes == ["hil.reference_failed", "hil.reference_failed"], [str(r) for r in report.reasons]
    assert "blocker B1" in report.reasons[0].message and "cannot read the answer 'euro'" in report.reasons[0].message


def test_a_run_without_a_reward_is_an_error_not_a_blocker_that_matters(validator, tmp_path):
    """Tests that write no reward file for a wrong currency: the alternative's run has no verdict."""
    test = CURRENCY_TEST.replace("{wrong}", '[ "$got" = "EUR" ] || exit 0')
    report = validator.validate(_currency_task(tmp_path, "silent", "USD", test))
    assert [r.code for r in report.reasons] == ["hil.no_reward", "hil.no_reward"], [str(r) for r in report.reasons]
    assert "no_reward_file" in report.reasons[0].message


def test_the_alternative_is_what_the_reference_runs_with(validator, tmp_path):
    """A parseable alternative the tests reject: the task is admitted."""
    report = validator.validate(_currency_task(tmp_path, "fine", "USD", CURRENCY_TEST.replace("{wrong}", "")))
    assert report.valid, [str(r) for r in report.reasons]
