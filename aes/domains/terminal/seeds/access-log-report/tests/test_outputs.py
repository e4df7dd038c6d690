"""Checks /app/report.json; each test is one part of the reward."""

import json
from pathlib import Path

import pytest

REPORT = Path("/app/report.json")


@pytest.fixture(scope="module")
def report():
    return json.loads(REPORT.read_text())


def test_report_is_json_object(report):
    assert isinstance(report, dict)


def test_total_requests(report):
    assert report["total_requests"] == 360


def test_status_counts(report):
    assert report["status_counts"] == {"200": 258, "301": 12, "404": 35, "500": 21, "502": 16, "503": 18}


def test_top_ips(report):
    assert report["top_ips"] == ["10.0.3.4", "10.0.0.35", "10.0.0.33"]


def test_server_errors_by_day(report):
    assert report["server_errors_by_day"] == {"2026-03-14": 21, "2026-03-15": 34}


def test_bytes_total(report):
    assert report["bytes_total"] == 861578
