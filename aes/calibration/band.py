"""Calibration band decisions (paper §3.2, App. G.4), pure functions of the reward list.

Start with ``initial_attempts``; expand to ``expanded_attempts`` when the mean lies within
``expand_margin`` of a band edge; admit when the mean is in ``[band_low, band_high]`` and
the reward standard deviation (population) is at least ``min_std``.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from aes.config import CalibrationConfig

ADMIT = "admit"
TOO_HARD = "too_hard"
TOO_EASY = "too_easy"
NO_SPREAD = "no_spread"
NO_REWARDS = "no_rewards"
EPS = 1e-9
"""Tolerance for float noise at band edges (a mean of 0.25 must not read as 0.2499999)."""


@dataclass
class BandDecision:
    verdict: str
    """admit, too_hard (below the band), too_easy (above it), no_spread (in band, std too low), no_rewards."""
    attempts: int
    mean: float | None
    std: float | None
    reason: str


def mean_std(rewards: list[float]) -> tuple[float, float]:
    return statistics.fmean(rewards), statistics.pstdev(rewards)


def needs_expansion(rewards: list[float], cfg: CalibrationConfig) -> bool:
    """True after the initial attempts when the mean is near a band edge."""
    if not rewards or len(rewards) >= cfg.expanded_attempts:
        return False
    mean, _ = mean_std(rewards)
    return min(abs(mean - cfg.band_low), abs(mean - cfg.band_high)) <= cfg.expand_margin + EPS


def decide(rewards: list[float], cfg: CalibrationConfig) -> BandDecision:
    """The verdict on a list of attempt rewards."""
    if not rewards:
        return BandDecision(NO_REWARDS, 0, None, None, "no attempt produced a reward")
    mean, std = mean_std(rewards)
    n = len(rewards)
    band = f"[{cfg.band_low:g}, {cfg.band_high:g}]"
    if mean < cfg.band_low - EPS:
        return BandDecision(TOO_HARD, n, mean, std, f"mean reward {mean:.3f} is below the band {band}")
    if mean > cfg.band_high + EPS:
        return BandDecision(TOO_EASY, n, mean, std, f"mean reward {mean:.3f} is above the band {band}")
    if std < cfg.min_std - EPS:
        return BandDecision(NO_SPREAD, n, mean, std,
                            f"reward std {std:.3f} < {cfg.min_std:g}: attempts do not differ enough to learn from")
    return BandDecision(ADMIT, n, mean, std, f"mean {mean:.3f} in {band}, std {std:.3f} >= {cfg.min_std:g}")
