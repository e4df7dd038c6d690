"""Calibration band decisions on synthetic reward lists."""

from __future__ import annotations

import pytest

from aes.calibration import ADMIT, NO_REWARDS, NO_SPREAD, TOO_EASY, TOO_HARD, decide, needs_expansion
from aes.config import CalibrationConfig

CFG = CalibrationConfig()


@pytest.mark.parametrize("rewards,verdict", [
    ([0.0, 0.5, 1.0, 0.5], ADMIT),          # mean 0.5, std 0.35
    ([0.0, 0.0, 0.0, 1.0], ADMIT),          # mean 0.25 exactly: the low edge is inside
    ([1.0, 1.0, 1.0, 0.0], ADMIT),          # mean 0.75 exactly: the high edge is inside
    ([0.0, 0.0, 0.0, 0.0], TOO_HARD),
    ([0.2, 0.2, 0.2, 0.3], TOO_HARD),
    ([1.0, 1.0, 1.0, 1.0], TOO_EASY),
    ([0.8, 0.8, 0.8, 0.8], TOO_EASY),
    ([0.5, 0.5, 0.5, 0.5], NO_SPREAD),      # in band but every attempt scores the same
    ([0.45, 0.55, 0.5, 0.5], NO_SPREAD),    # std 0.035 < 0.1
    ([], NO_REWARDS),
])
def test_verdicts(rewards, verdict):
    assert decide(rewards, CFG).verdict == verdict


def test_std_is_population_std():
    decision = decide([0.3, 0.5], CFG)
    assert decision.std == pytest.approx(0.1)
    assert decision.mean == pytest.approx(0.4)


@pytest.mark.parametrize("rewards,expand", [
    ([0.0, 0.0, 0.0, 0.0], False),   # mean 0: 0.25 from the low edge
    ([0.0, 0.0, 0.0, 0.5], True),    # mean 0.125: within 0.15 of 0.25
    ([0.0, 0.5, 0.5, 0.5], True),    # mean 0.375: within 0.15 of 0.25, inside the band
    ([0.5, 0.5, 0.5, 0.5], False),   # mean 0.5: 0.25 from both edges
    ([1.0, 1.0, 0.5, 1.0], True),    # mean 0.875: within 0.15 of 0.75
    ([1.0, 1.0, 1.0, 1.0], False),   # mean 1.0: 0.25 from the high edge
])
def test_expansion_near_band_edges(rewards, expand):
    assert needs_expansion(rewards, CFG) is expand


def test_no_expansion_once_expanded():
    assert not needs_expansion([0.0, 0.0, 0.0, 0.5] * 2, CFG)


def test_every_number_comes_from_config():
    cfg = CalibrationConfig(band_low=0.1, band_high=0.9, min_std=0.45, expand_margin=0.05,
                            initial_attempts=2, expanded_attempts=3)
    assert decide([0.0, 0.0, 0.0, 1.0], cfg).verdict == NO_SPREAD   # std 0.433 < 0.45
    assert decide([0.0, 1.0], cfg).verdict == ADMIT                 # std 0.5
    assert decide([0.95, 0.95], cfg).verdict == TOO_EASY
    assert needs_expansion([0.1, 0.2], cfg) and not needs_expansion([0.5, 0.5], cfg)
    assert not needs_expansion([0.1, 0.2, 0.1], cfg)                # already at expanded_attempts
