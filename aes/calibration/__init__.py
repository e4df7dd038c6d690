"""Calibration: admit envs whose solver rewards sit in the band and vary across attempts."""

from aes.calibration.band import ADMIT, NO_REWARDS, NO_SPREAD, TOO_EASY, TOO_HARD, BandDecision, decide, needs_expansion
from aes.calibration.calibrate import CalibrationResult, Calibrator, solution_hints

__all__ = ["ADMIT", "NO_REWARDS", "NO_SPREAD", "TOO_EASY", "TOO_HARD", "BandDecision", "CalibrationResult",
           "Calibrator", "decide", "needs_expansion", "solution_hints"]
