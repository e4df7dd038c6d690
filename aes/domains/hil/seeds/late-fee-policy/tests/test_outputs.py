"""Calls late_fee() in /app/billing/late_fees.py and checks the April report; each test is one
part of the reward. The expected fees (expected.json) follow the billing team's actual policy.

The agent's module never runs in this process, which decides the reward: late_fee runs in a child
process as an unprivileged user (tests/untrusted.py, a byte copy of aes/domains/kit/untrusted.py),
which cannot read this folder, and only plain values come back."""

import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from untrusted import Untrusted, readable  # noqa: E402

EXPECTED = json.loads((HERE / "expected.json").read_text())

HARNESS = """
from datetime import date
from decimal import Decimal

from billing.late_fees import late_fee


def _plain(fee):
    if isinstance(fee, bool) or not isinstance(fee, (int, float, Decimal)):
        return repr(fee)[:200]  # not a number: never equal to an expected fee
    return int(fee) if fee == int(fee) else str(fee)


def fees(cases):
    return [[amount, due, as_of, _plain(late_fee(amount, date.fromisoformat(due), date.fromisoformat(as_of)))]
            for amount, due, as_of in cases]
"""


@pytest.fixture(scope="module")
def late_fee():
    readable("/app")
    with Untrusted(["/app"], helpers={"harness": HARNESS}) as child:
        yield child.module("harness")


def fees(late_fee, group):
    return late_fee.fees([case[:3] for case in EXPECTED["cases"][group]])


def test_no_fee_before_the_due_date(late_fee):
    assert fees(late_fee, "not_yet_due") == EXPECTED["cases"]["not_yet_due"]


def test_no_fee_during_the_grace_period(late_fee):
    assert fees(late_fee, "grace_period") == EXPECTED["cases"]["grace_period"]


def test_fee_in_the_first_month(late_fee):
    assert fees(late_fee, "first_month") == EXPECTED["cases"]["first_month"]


def test_fee_grows_with_each_month(late_fee):
    assert fees(late_fee, "month_counting") == EXPECTED["cases"]["month_counting"]


def test_cap_on_large_invoices(late_fee):
    assert fees(late_fee, "cap_large_invoice") == EXPECTED["cases"]["cap_large_invoice"]


def test_cap_on_small_invoices(late_fee):
    group = "small_invoice_not_capped_at_8_percent"
    assert fees(late_fee, group) == EXPECTED["cases"][group]


def test_april_report():
    report = Path("/app/out/late_fees.csv")
    assert report.is_file(), "the April report was not written"
    assert report.read_text().replace("\r\n", "\n") == EXPECTED["report_csv"].replace("\r\n", "\n")
