"""Drives RateLimiter from /app/ratelimit/limiter.py with request sequences and checks the
replayed decisions; each test is one part of the reward. expected.json follows the API team's
actual limits."""

import json
import sys
from pathlib import Path

import pytest

EXPECTED = json.loads((Path(__file__).parent / "expected.json").read_text())


@pytest.fixture(scope="module")
def limiter_class():
    sys.path.insert(0, "/app")
    from ratelimit.limiter import RateLimiter

    return RateLimiter


def run(limiter_class, case):
    """A fresh limiter on the test key table, fed the case's requests in order."""
    limiter = limiter_class({k: dict(v) for k, v in EXPECTED["keys"].items()})
    return [[key, ts, bool(limiter.allow(key, ts))] for key, ts, _ in EXPECTED["cases"][case]]


@pytest.mark.parametrize("case", ["unknown_key", "free_limit", "pro_limit", "internal", "shared_account",
                                  "sliding_window", "rejected_do_not_count"])
def test_decisions(limiter_class, case):
    assert run(limiter_class, case) == EXPECTED["cases"][case]


def test_replayed_traffic():
    out = Path("/app/out/decisions.txt")
    assert out.is_file(), "the traffic was not replayed"
    assert out.read_text() == EXPECTED["decisions"]
