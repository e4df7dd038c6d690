"""Private tests of the telemetry fix: the documented window invariants for negative and very
large timestamps and many widths, consistency of every public function, the unchanged API and validation.
Each test is one part of the reward, which tests/test.sh gives only once the repository's public
tests pass and test_gate_* (the issue's rule, on cases the public tests do not show) passes: both fail on the repository as built, so
doing nothing earns 0. The package runs in a child process as another user (tests/untrusted.py)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from untrusted import Untrusted, raises  # noqa: E402

REPO = "/app/repo"
SECOND = 1_000_000_000
WIDTHS = [1, 3, 7, 1_000, SECOND, 86_400 * SECOND]
TIMESTAMPS = [0, 1, -1, 999, -999, 1_000, -1_000, -1_001, 10**15 + 7, -(10**15) - 7,
              1_700_000_000_123_456_789, -1_700_000_000_123_456_789, 2**62 + 1, -(2**62) - 1, 2**80 + 5]


PROBE = """
import telemetry


def bucket(samples, width):
    return [(w.index, w.start, w.end, w.count, w.total, w.minimum, w.maximum) for w in telemetry.bucket(samples, width)]
"""


@pytest.fixture(scope="module")
def child():
    """The package, imported in a child process as an unprivileged user (tests/untrusted.py):
    its code never runs in this process, which decides the reward."""
    with Untrusted([REPO], helpers={"probe": PROBE}) as untrusted:
        yield untrusted


@pytest.fixture(scope="module")
def tm(child):
    return child.module("telemetry")


@pytest.fixture(scope="module")
def probe(child):
    return child.module("probe")


def test_gate_the_issue_is_fixed(tm):
    """Issue #41's rule - floor, not truncation - on its own case and on cases the public tests do
    not show (earns nothing itself: while it fails the reward is 0, so special-casing the issue's
    example earns nothing)."""
    assert tm.window_index(-1, SECOND) == -1
    assert tm.window_index(-8, 7) == -2
    assert tm.window_start(-1_001, 1_000) == -2_000
    assert tm.window_bounds(-1, 3) == (-3, 0)


def test_negative_timestamps_use_floor(tm):
    assert tm.window_index(-1, SECOND) == -1
    assert tm.window_index(-SECOND, SECOND) == -1
    assert tm.window_index(-SECOND - 1, SECOND) == -2
    assert tm.window_index(-7, 7) == -1 and tm.window_index(-8, 7) == -2
    assert tm.window_start(-1, 1_000) == -1_000
    assert tm.window_bounds(-1_001, 1_000) == (-2_000, -1_000)


def test_large_timestamps_keep_nanosecond_precision(tm):
    t = 1_700_000_000_123_456_789
    assert tm.window_index(t, 1) == t
    assert tm.window_start(t, 1_000) == 1_700_000_000_123_456_000
    assert tm.window_bounds(2**62 + 1, 2) == (2**62, 2**62 + 2)
    assert tm.window_index(2**80 + 5, 10) == (2**80 + 5) // 10


def test_invariants_across_widths_and_magnitudes(tm):
    for width in WIDTHS:
        for t in TIMESTAMPS:
            k = tm.window_index(t, width)
            start, end = tm.window_bounds(t, width)
            assert type(k) is int and type(start) is int and type(end) is int, (t, width)
            assert start == k * width == tm.window_start(t, width), (t, width)
            assert end - start == width and start <= t < end, (t, width)


def test_windows_between_across_the_epoch(tm):
    assert tm.windows_between(-1_500, 1_500, 1_000) == [-2, -1, 0, 1]
    assert tm.windows_between(-1, 0, SECOND) == [-1, 0]
    big = 1_700_000_000_123_456_789
    assert tm.windows_between(big - 1, big + 1, 1) == [big - 1, big, big + 1]


def test_bucket_across_the_epoch(probe):
    samples = [(499, 1.0), (-500, 2.0), (-1_500, 4.0), (0, 8.0), (1_499, 16.0), (-1, 32.0)]
    got = probe.bucket(samples, 1_000)
    assert got == [(-2, -2_000, -1_000, 1, 4.0, 4.0, 4.0), (-1, -1_000, 0, 2, 34.0, 2.0, 32.0),
                   (0, 0, 1_000, 2, 9.0, 1.0, 8.0), (1, 1_000, 2_000, 1, 16.0, 16.0, 16.0)]


def test_bucket_large_timestamps(probe):
    base = 1_700_000_000_123_456_789
    windows = probe.bucket([(base, 1.0), (base + 1, 2.0), (base + 2, 3.0)], 1)
    assert [w[:4] for w in windows] == [
        (base, base, base + 1, 1), (base + 1, base + 1, base + 2, 1), (base + 2, base + 2, base + 3, 1)]


def test_api_and_validation_unchanged(tm):
    for bad in (1.5, True, "10", None):
        assert raises(TypeError, tm.window_index, bad, 1_000)
        assert raises(TypeError, tm.window_bounds, 0, bad)
    for width in (0, -1_000):
        assert raises(ValueError, tm.window_start, 5, width)
    assert set(tm.value("__all__")) >= {"Window", "bucket", "window_bounds", "window_index", "window_start",
                               "windows_between"}
