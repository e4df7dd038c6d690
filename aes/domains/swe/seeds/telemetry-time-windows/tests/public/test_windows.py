"""Regression tests of telemetry's window arithmetic."""

import pytest

from telemetry import bucket, window_bounds, window_index, window_start, windows_between

SECOND = 1_000_000_000


def test_index_of_positive_timestamps():
    assert window_index(0, 1_000) == 0
    assert window_index(999, 1_000) == 0
    assert window_index(1_000, 1_000) == 1
    assert window_index(5 * SECOND + 1, SECOND) == 5


def test_bounds_are_half_open():
    assert window_bounds(1_500, 1_000) == (1_000, 2_000)
    assert window_bounds(2_000, 1_000) == (2_000, 3_000)


def test_windows_between():
    assert windows_between(1_500, 3_200, 1_000) == [1, 2, 3]
    assert windows_between(3_200, 1_500, 1_000) == []


def test_bucket_aggregates_per_window():
    samples = [(1_900, 4.0), (1_500, 2.0), (2_100, 1.0)]
    first, second = bucket(samples, 1_000)
    assert (first.index, first.start, first.end, first.count, first.total) == (1, 1_000, 2_000, 2, 6.0)
    assert (first.minimum, first.maximum) == (2.0, 4.0)
    assert (second.index, second.count, second.total) == (2, 1, 1.0)


def test_rejects_bad_arguments():
    with pytest.raises(TypeError):
        window_index(1.5, 1_000)
    with pytest.raises(ValueError):
        window_index(10, 0)


def test_timestamp_just_before_the_epoch():
    """Issue #41: t = -1 ns belongs to the window that starts at -1 s."""
    assert window_index(-1, SECOND) == -1
    assert window_start(-1, SECOND) == -SECOND
