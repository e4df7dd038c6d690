"""Authoring script for hil/config-migration: v1 files (environment and hidden test set) and
the expected v2 documents under the true answers."""
import configparser, json, sys
from pathlib import Path

T = Path(sys.argv[1])
TIMEOUT_FACTOR, KEEP_EXPORT, KEEP_UNKNOWN, DEFAULT_POOL = 1000, True, True, 12
TRUE, FALSE = {"yes", "true", "on"}, {"no", "false", "off"}


def migrate(text):
    cp = configparser.ConfigParser(interpolation=None)
    cp.read_string(text)
    known = {("service", "name"), ("service", "owner"), ("server", "host"), ("server", "port"),
             ("server", "request_timeout"), ("database", "url"), ("database", "pool")}
    doc = {"version": 2,
           "service": {"name": cp["service"]["name"], "owner": cp["service"]["owner"]},
           "server": {"listen": f'{cp["server"]["host"]}:{cp["server"]["port"]}',
                      "request_timeout": int(cp["server"]["request_timeout"]) * TIMEOUT_FACTOR},
           "database": {"url": cp["database"]["url"], "pool_size": int(cp["database"].get("pool", DEFAULT_POOL))},
           "features": {}}
    extra = {}
    for section in cp.sections():
        for key, value in cp[section].items():
            if section == "features":
                v = value.strip().lower()
                doc["features"][key] = v in TRUE
                assert v in TRUE | FALSE
            elif section == "legacy":
                if key == "export_path" and KEEP_EXPORT:
                    doc["exports"] = {"path": value}
            elif (section, key) not in known and KEEP_UNKNOWN:
                extra[f"{section}.{key}"] = value
    if extra:
        doc["extra"] = extra
    return doc


ENV = {
"billing-api": """[service]
name = billing-api
owner = team-payments

[server]
host = 0.0.0.0
port = 8080
request_timeout = 30

[database]
url = postgres://billing@db-1.internal/billing
pool = 8

[features]
async_invoices = yes
pdf_v2 = no

[legacy]
export_path = /srv/exports/billing
xml_reports = yes
""",
"search-api": """[service]
name = search-api
owner = team-discovery

[server]
host = 0.0.0.0
port = 8000
request_timeout = 5
workers = 6

[database]
url = postgres://search@db-2.internal/search

[features]
fuzzy_match = on
synonyms = off
""",
"notifier": """[service]
name = notifier
owner = team-messaging

[server]
host = 127.0.0.1
port = 9100
request_timeout = 10

[database]
url = postgres://notify@db-1.internal/notify
pool = 4

[features]

[smtp]
relay = smtp.internal:25
sender = no-reply@example.com
""",
"ledger-sync": """[service]
name = ledger-sync
owner = team-finance-eng

[server]
host = 0.0.0.0
port = 8443
request_timeout = 120

[database]
url = postgres://ledger@db-3.internal/ledger

[features]
dry_run = false

[legacy]
export_path = /srv/exports/ledger
""",
"reports": """[service]
name = reports
owner = team-analytics

[server]
host = 0.0.0.0
port = 8081
request_timeout = 300

[database]
url = postgres://reports@replica-1.internal/warehouse
pool = 2

[features]
scheduled = yes
csv_bom = no
xlsx = yes

[legacy]
xml_reports = no
""",
"auth-gateway": """[service]
name = auth-gateway
owner = team-identity

[server]
host = 0.0.0.0
port = 8000
request_timeout = 3

[database]
url = postgres://auth@db-1.internal/auth
pool = 16

[features]
mfa_required = true
""",
"media-resizer": """[service]
name = media-resizer
owner = team-content

[server]
host = 0.0.0.0
port = 7070
request_timeout = 60
max_body_mb = 25

[database]
url = postgres://media@db-4.internal/media

[features]
webp = yes

[cache]
ttl_seconds = 900
""",
}
HIDDEN = {
"geo-lookup": """[service]
name = geo-lookup
owner = team-maps

[server]
host = 10.0.0.5
port = 8200
request_timeout = 2
keepalive = off

[database]
url = postgres://geo@db-5.internal/geo

[features]
ipv6 = on

[legacy]
export_path = /srv/exports/geo
csv_dialect = excel
""",
"invoice-pdf": """[service]
name = invoice-pdf
owner = team-payments

[server]
host = 0.0.0.0
port = 8090
request_timeout = 45

[database]
url = postgres://pdf@db-1.internal/billing
pool = 3

[features]
""",
"audit-trail": """[service]
name = audit-trail
owner = team-security

[server]
host = 0.0.0.0
port = 8500
request_timeout = 15

[database]
url = postgres://audit@db-6.internal/audit

[features]
tamper_check = yes
compress = no

[retention]
days = 400
""",
}
for name, text in ENV.items():
    (T / f"environment/app/configs/v1/{name}.ini").write_text(text)
for name, text in HIDDEN.items():
    (T / f"tests/v1/{name}.ini").write_text(text)
expected = {"app": {n: migrate(t) for n, t in ENV.items()}, "hidden": {n: migrate(t) for n, t in HIDDEN.items()}}
(T / "tests/expected.json").write_text(json.dumps(expected, indent=1) + "\n")
print(json.dumps(expected["app"]["search-api"], indent=1))
