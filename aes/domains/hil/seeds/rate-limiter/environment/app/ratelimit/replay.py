"""Replays a request log through the rate limiter and records each decision.

    python3 -m ratelimit.replay data/requests.log --keys data/api_keys.csv --out out/decisions.txt

Each log line is ``<ts> <api_key> <method> <path>``; each output line is
``<ts> <api_key> ALLOW`` or ``<ts> <api_key> DENY``, in log order.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ratelimit.keys import load_keys
from ratelimit.limiter import RateLimiter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--keys", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    limiter = RateLimiter(load_keys(args.keys))
    lines, denied = [], 0
    for line in args.log.read_text().splitlines():
        if not line.strip():
            continue
        ts, key = line.split()[:2]
        ok = limiter.allow(key, float(ts))
        denied += not ok
        lines.append(f"{ts} {key} {'ALLOW' if ok else 'DENY'}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"{len(lines)} requests, {denied} denied")


if __name__ == "__main__":
    main()
