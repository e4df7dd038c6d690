#!/bin/bash
# Reference: implement RateLimiter with the API team's answers (read from answers.json, the only
# place they are written down) and replay the traffic.
set -euo pipefail
python3 - <<'PY'
import json
import re
from pathlib import Path

answers = json.loads(Path("/solution/answers.json").read_text())


def parse(pattern, text):
    match = re.fullmatch(pattern, text)
    if not match:
        raise SystemExit(f"cannot read the answer {text!r}")
    return match.groups()


limits = {}
for part in answers["B1"].split("; "):
    plan, count, seconds = parse(r"(\w+): (?:(\d+) requests per (\d+) seconds|unlimited)", part)
    limits[plan] = None if count is None else (int(count), int(seconds) * 1000)
assert set(limits) == {"free", "pro", "internal"}, limits
(scope,) = parse(r"(per account): all API keys of one account share a single limit"
                 r"|(?:per API key): each key has its own limit", answers["B2"])
(window,) = parse(r"(sliding): a request at time t counts the requests in \(t - window, t\], measured in milliseconds"
                  r"|(?:fixed): windows start at whole multiples of the window length since the epoch",
                  answers["B3"])
(rejected,) = parse(r"(no): only allowed requests count toward the limit"
                    r"|(?:yes): every request counts toward the limit, allowed or not", answers["B4"])

Path("/app/ratelimit/limiter.py").write_text(f'''"""The gateway's rate limiter."""

from __future__ import annotations

from collections import defaultdict, deque

# plan -> (requests, window in ms), or None for no limit
LIMITS = {limits!r}
SHARED_PER_ACCOUNT = {scope is not None}
SLIDING_WINDOW = {window is not None}
COUNT_REJECTED = {rejected is None}


class RateLimiter:
    """Decides, request by request, whether an API request may go through."""

    def __init__(self, keys: dict[str, dict[str, str]]):
        """``keys``: the key table, as :func:`ratelimit.keys.load_keys` returns it."""
        self.keys = keys
        self.seen = defaultdict(deque)  # bucket -> timestamps (ms) that count toward its limit

    def allow(self, api_key: str, ts: float) -> bool:
        """True if the request made with ``api_key`` at ``ts`` (seconds since the epoch,
        millisecond precision; calls come in non-decreasing ``ts`` order) may go through."""
        entry = self.keys.get(api_key)
        if entry is None:
            return False
        limit = LIMITS[entry["plan"]]
        if limit is None:
            return True
        count, window = limit
        now = round(ts * 1000)
        bucket = self.seen[entry["account"] if SHARED_PER_ACCOUNT else api_key]
        if SLIDING_WINDOW:
            while bucket and bucket[0] <= now - window:
                bucket.popleft()
        else:
            while bucket and bucket[0] // window != now // window:
                bucket.popleft()
        ok = len(bucket) < count
        if ok or COUNT_REJECTED:
            bucket.append(now)
        return ok
''')
PY
cd /app && python3 -m ratelimit.replay data/requests.log --keys data/api_keys.csv --out out/decisions.txt
