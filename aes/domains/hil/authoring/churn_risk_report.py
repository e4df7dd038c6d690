"""Authoring script for hil/churn-risk-report: the SaaS database (image and a hidden variant for
the tests) and the expected report under the true answers, computed in Python (not SQL)."""
import json, random, sys
from datetime import date, datetime, timedelta
from pathlib import Path

T = Path(sys.argv[1])
AS_OF = date(2026, 6, 30)
PAYING, THRESHOLD, NEVER, ORDER = {"active", "past_due"}, 21, "signup", ("mrr", "id")
FIRST = ["Acme", "Bluefin", "Cobalt", "Driftwood", "Ember", "Foxglove", "Gantry", "Hollow", "Indigo", "Jetstream",
         "Kiln", "Lattice", "Meridian", "Nimbus", "Orchard", "Pylon", "Quarry", "Redwood", "Sable", "Tundra",
         "Umber", "Vantage", "Willow", "Xylem", "Yarrow", "Zephyr"]
LAST = ["Labs", "Studio", "Health", "Logistics", "Capital", "Foods", "Robotics", "Media", "Energy", "Legal"]
PLANS = {"starter": 2900, "team": 9900, "business": 29900}


def build(seed, n, forced_days):
    rng = random.Random(seed)
    names = rng.sample([f"{a} {b}" for a in FIRST for b in LAST], n)
    customers, subs, logins = [], [], []
    sid = 1
    for cid in range(1, n + 1):
        signup = AS_OF - timedelta(days=rng.randint(5, 540))
        customers.append((cid, names[cid - 1], rng.choice(["US", "DE", "GB", "FR", "NL", "CA", "AU"]), signup.isoformat()))
        if rng.random() < 0.3:  # an earlier, canceled subscription
            plan = rng.choice(list(PLANS))
            end = signup + timedelta(days=rng.randint(1, max(1, (AS_OF - signup).days - 1)))
            subs.append((sid, cid, plan, "canceled", PLANS[plan], signup.isoformat(), end.isoformat())); sid += 1
        status = rng.choices(["active", "past_due", "trialing", "canceled"], [55, 15, 15, 15])[0]
        plan = rng.choice(list(PLANS))
        mrr = PLANS[plan] * rng.choice([1, 1, 1, 2, 3, 5])
        subs.append((sid, cid, plan, status, mrr, signup.isoformat(),
                     (AS_OF - timedelta(days=rng.randint(1, 60))).isoformat() if status == "canceled" else None)); sid += 1
        if cid in forced_days:
            gap = forced_days[cid]
        else:
            gap = rng.choice([None] * 2 + list(range(0, 15)) + list(range(15, 50)) + list(range(50, 200, 7)))
        if gap is None or gap > (AS_OF - signup).days:
            continue  # never logged in
        last = AS_OF - timedelta(days=gap)
        users = [f"user{u}@{names[cid - 1].split()[0].lower()}.example" for u in range(rng.randint(1, 4))]
        day = last
        for _ in range(rng.randint(1, 12)):
            if day < signup:
                break
            ts = datetime.combine(day, datetime.min.time()) + timedelta(seconds=rng.randint(0, 86399))
            logins.append((cid, rng.choice(users), ts.isoformat(sep=" ")))
            day -= timedelta(days=rng.randint(1, 20))
    rng.shuffle(logins)
    return customers, subs, logins


def sql(customers, subs, logins):
    q = lambda v: "NULL" if v is None else (str(v) if isinstance(v, int) else "'" + v.replace("'", "''") + "'")
    out = ["BEGIN;",
           "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL, signup_date TEXT NOT NULL);",
           "CREATE TABLE subscriptions (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), "
           "plan TEXT NOT NULL, status TEXT NOT NULL, mrr_cents INTEGER NOT NULL, started_on TEXT NOT NULL, canceled_on TEXT);",
           "CREATE TABLE logins (customer_id INTEGER NOT NULL REFERENCES customers(id), user_email TEXT NOT NULL, logged_in_at TEXT NOT NULL);"]
    for table, rows in (("customers", customers), ("subscriptions", subs), ("logins", logins)):
        out += [f"INSERT INTO {table} VALUES ({', '.join(q(v) for v in r)});" for r in rows]
    return "\n".join(out + ["COMMIT;"]) + "\n"


def report(customers, subs, logins, paying=PAYING, threshold=THRESHOLD, never=NEVER, order=ORDER):
    last = {}
    for cid, _, ts in logins:
        d = date.fromisoformat(ts[:10])
        last[cid] = max(last.get(cid, d), d)
    rows = []
    for cid, name, _, signup in customers:
        for _, scid, plan, status, mrr, *_ in subs:
            if scid != cid or status not in paying:
                continue
            if cid in last:
                days = (AS_OF - last[cid]).days
            elif never == "signup":
                days = (AS_OF - date.fromisoformat(signup)).days
            else:
                continue
            if days > threshold:
                rows.append([cid, name, plan, mrr, days])
    rows.sort(key=lambda r: (-r[3], r[0]))
    return rows


app = build(2026, 48, {3: 21, 4: 22, 5: 20, 6: 23, 7: None, 8: None, 9: 35, 10: 40, 11: 44, 12: 60})
variant = build(77, 30, {2: 22, 3: 21, 4: None, 5: 30, 6: 90})
(T / "environment/db/saas.sql").write_text(sql(*app))
(T / "tests/variant.sql").write_text(sql(*variant))
exp = {"columns": ["customer_id", "name", "plan", "mrr_cents", "days_inactive"],
       "app": report(*app), "variant": report(*variant)}
(T / "tests/expected.json").write_text(json.dumps(exp) + "\n")
for r in exp["app"]: print(r)
print(len(exp["variant"]), "variant rows")
# how the data tells the blockers apart
print("active only:", len(report(*app, paying={"active"})), " >30:", len(report(*app, threshold=30)),
      " never->excluded:", len(report(*app, never="skip")))
