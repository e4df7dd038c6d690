"""The gateway's rate limiter."""

from __future__ import annotations


class RateLimiter:
    """Decides, request by request, whether an API request may go through."""

    def __init__(self, keys: dict[str, dict[str, str]]):
        """``keys``: the key table, as :func:`ratelimit.keys.load_keys` returns it."""
        self.keys = keys

    def allow(self, api_key: str, ts: float) -> bool:
        """True if the request made with ``api_key`` at ``ts`` (seconds since the epoch,
        millisecond precision; calls come in non-decreasing ``ts`` order) may go through."""
        raise NotImplementedError
