"""Authoring script for hil/rate-limiter: key table, traffic log, expected decisions (truth model)."""
import json, random, sys
from collections import defaultdict
from pathlib import Path

T = Path(sys.argv[1])
LIMITS = {"free": (5, 10), "pro": (20, 10), "internal": None}
SHARED, SLIDING, COUNT_REJECTED = True, True, False


def simulate(keys, reqs, limits=LIMITS, shared=SHARED, sliding=SLIDING, count_rejected=COUNT_REJECTED):
    state, out = defaultdict(list), []
    for key, ts in reqs:
        if key not in keys:
            out.append(False); continue
        lim = limits[keys[key]["plan"]]
        if lim is None:
            out.append(True); continue
        n, w = lim
        wms, t = w * 1000, round(ts * 1000)
        bucket = keys[key]["account"] if shared else key
        counted = [x for x in state[bucket] if (x > t - wms if sliding else x // wms == t // wms)]
        ok = len(counted) < n
        if ok or count_rejected:
            state[bucket].append(t)
        out.append(ok)
    return out

keys_rows = [
    ("gw_4f1c9a2e", "acct_harbor", "pro"), ("gw_8b2d771f", "acct_harbor", "pro"),
    ("gw_13e0c5aa", "acct_lumen", "free"), ("gw_c9a4e810", "acct_lumen", "free"),
    ("gw_5d6f0b3c", "acct_ostrich", "free"), ("gw_a7e2193d", "acct_quill", "pro"),
    ("gw_0e9b4f62", "acct_ops", "internal"), ("gw_f21a8c07", "acct_vega", "free"),
]
(T / "environment/app/data/api_keys.csv").write_text(
    "api_key,account,plan\n" + "".join(f"{k},{a},{p}\n" for k, a, p in keys_rows))
keys = {k: {"account": a, "plan": p} for k, a, p in keys_rows}

rng = random.Random(11)
BASE = 1767225600.0  # 2026-01-01T00:00:00Z
paths = ["GET /v1/items", "GET /v1/items/42", "POST /v1/orders", "GET /v1/orders", "GET /v1/me"]
reqs = []
for key, (_, plan) in {k: (a, p) for k, a, p in keys_rows}.items():
    for _ in range(rng.randint(3, 5)):
        t = rng.uniform(0, 110)
        mean_gap = {"free": 0.6, "pro": 0.15, "internal": 0.05}[plan]
        for _ in range(rng.randint(4, 30)):
            t += rng.expovariate(1 / mean_gap)
            reqs.append((round(BASE + t, 3), key))
reqs.append((round(BASE + 55.5, 3), "gw_deadbeef"))  # a revoked key
reqs.sort()
# no two requests of one account exactly 10 s apart (the window edge would decide them)
by_acct = defaultdict(set)
for ts, key in reqs:
    by_acct[keys.get(key, {"account": key})["account"]].add(round(ts * 1000))
for s in by_acct.values():
    assert not any(x + 10000 in s for x in s)
lines = [f"{ts:.3f} {key} {rng.choice(paths)}" for ts, key in reqs]
(T / "environment/app/data/requests.log").write_text("\n".join(lines) + "\n")
decisions = simulate(keys, [(k, ts) for ts, k in reqs])
expected_log = "".join(f"{ts:.3f} {key} {'ALLOW' if ok else 'DENY'}\n" for (ts, key), ok in zip(reqs, decisions))

TEST_KEYS = {"t_free_a": {"account": "acct_t1", "plan": "free"}, "t_free_b": {"account": "acct_t1", "plan": "free"},
             "t_pro": {"account": "acct_t2", "plan": "pro"}, "t_int": {"account": "acct_t3", "plan": "internal"},
             "t_free_c": {"account": "acct_t4", "plan": "free"}}
def seq(pairs):
    got = simulate(TEST_KEYS, pairs)
    return [[k, ts, ok] for (k, ts), ok in zip(pairs, got)]
cases = {
    "free_limit": seq([("t_free_c", round(100 + 0.2 * i, 3)) for i in range(8)] + [("t_free_c", 111.0)]),
    "pro_limit": seq([("t_pro", round(200.05 + 0.1 * i, 3)) for i in range(25)]),
    "internal": seq([("t_int", round(300 + 0.01 * i, 3)) for i in range(300)]),
    "shared_account": seq([("t_free_a" if i % 2 == 0 else "t_free_b", round(400 + 0.3 * i, 3)) for i in range(8)]),
    "sliding_window": seq([("t_free_c", t) for t in (1008.0, 1009.0, 1009.5, 1009.8, 1009.9, 1010.1, 1018.5, 1018.6, 1019.2)]),
    "rejected_do_not_count": seq([("t_free_c", round(2000 + 0.1 * i, 3)) for i in range(5)]
                                 + [("t_free_c", round(2001.05 + i, 3)) for i in range(15)]),
    "unknown_key": seq([("t_free_c", 3000.0), ("nope", 3000.5), ("", 3001.0)]),
}
(T / "tests/expected.json").write_text(json.dumps({"keys": TEST_KEYS, "cases": cases, "decisions": expected_log}) + "\n")
for name, c in cases.items():
    print(name, "".join("A" if ok else "d" for *_, ok in c))
print(len(reqs), "requests", decisions.count(False), "denied")
