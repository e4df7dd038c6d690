"""Drives RateLimiter from /app/ratelimit/limiter.py with request sequences and checks the
replayed decisions; each test is one part of the reward. expected.json follows the API team's
actual limits.

The agent's module never runs in this process, which decides the reward: RateLimiter runs in a
child process as an unprivileged user (tests/untrusted.py, a byte copy of
aes/domains/kit/untrusted.py), which cannot read this folder, and only plain values come back."""

import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from untrusted import Untrusted, readable  # noqa: E402

EXPECTED = json.loads((HERE / "expected.json").read_text())

HARNESS = """
from ratelimit.limiter import RateLimiter


def run(keys, requests):
    # a fresh limiter on the key table, fed the requests in order: [key, ts, allowed]
    limiter = RateLimiter(keys)
    return [[key, ts, bool(limiter.allow(key, ts))] for key, ts in requests]
"""


@pytest.fixture(scope="module")
def limiter():
    readable("/app")
    with Untrusted(["/app"], helpers={"harness": HARNESS}) as child:
        yield child.module("harness")


def run(limiter, case):
    """A fresh limiter on the test key table, fed the case's requests in order."""
    return limiter.run({k: dict(v) for k, v in EXPECTED["keys"].items()},
                       [[key, ts] for key, ts, _ in EXPECTED["cases"][case]])


@pytest.mark.parametrize("case", ["unknown_key", "free_limit", "pro_limit", "internal", "shared_account",
                                  "sliding_window", "rejected_do_not_count"])
def test_decisions(limiter, case):
    assert run(limiter, case) == EXPECTED["cases"][case]


def test_replayed_traffic():
    out = Path("/app/out/decisions.txt")
    assert out.is_file(), "the traffic was not replayed"
    assert out.read_text() == EXPECTED["decisions"]
