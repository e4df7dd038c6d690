"""Checks /app/reconciliation.json; each test is one part of the reward."""

import json
from pathlib import Path

import pytest

REPORT = Path("/app/reconciliation.json")


@pytest.fixture(scope="module")
def report():
    return json.loads(REPORT.read_text())


def test_matched_count(report):
    assert report["matched"] == 49


def test_missing_in_bank(report):
    assert report["missing_in_bank"] == ["INV-1012", "INV-1017", "INV-1029", "INV-1033", "INV-1060"]


def test_missing_in_ledger(report):
    assert report["missing_in_ledger"] == ["INV-0987", "INV-1075", "INV-1090"]


def test_amount_mismatches(report):
    assert report["amount_mismatches"] == [
        {"invoice_id": "INV-1005", "ledger_amount": "4122.13", "bank_amount": "4162.97"},
        {"invoice_id": "INV-1031", "ledger_amount": "2216.83", "bank_amount": "2224.75"},
        {"invoice_id": "INV-1035", "ledger_amount": "271.31", "bank_amount": "237.61"},
        {"invoice_id": "INV-1046", "ledger_amount": "3676.22", "bank_amount": "3639.40"},
        {"invoice_id": "INV-1051", "ledger_amount": "2417.43", "bank_amount": "2409.87"},
        {"invoice_id": "INV-1058", "ledger_amount": "1535.79", "bank_amount": "1498.82"},
    ]


def test_ledger_total(report):
    assert report["ledger_total"] == "163809.81"


def test_bank_total(report):
    assert report["bank_total"] == "153559.24"


def test_exact_keys(report):
    assert set(report) == {"matched", "missing_in_bank", "missing_in_ledger", "amount_mismatches",
                           "ledger_total", "bank_total"}
