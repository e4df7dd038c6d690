"""Small statistics for reports: proportions with their 95% interval."""

from __future__ import annotations

import math


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float | None, float | None]:
    """The Wilson score interval of a proportion (95% by default); (None, None) when n is 0."""
    if n <= 0:
        return None, None
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(successes: int, n: int) -> dict:
    """``{"rate", "low", "high", "n"}``: a proportion and its 95% interval."""
    low, high = wilson(successes, n)
    return {"rate": successes / n if n else None, "low": low, "high": high, "n": n, "k": successes}
