#!/bin/bash
# Reference: write the migration with the platform team's answers (read from answers.json, the
# only place they are written down) and migrate the v1 files.
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


ms, factor = parse(r"integer (?:(milliseconds) \(the v1 value in seconds times (\d+)\)"
                   r"|seconds \(the v1 value as it is\))", answers["B1"])
(keep,) = parse(r"(keep it): move \[legacy\] export_path to exports\.path, the nightly exporter still reads it; "
                r"drop the other \[legacy\] keys|drop it: the whole \[legacy\] section goes, export_path included",
                answers["B2"])
(carry,) = parse(r'(carry them) into extra as "<section>\.<key>": "<v1 value>" strings, and leave extra out when '
                 r"a service has none|drop them: v2 files carry only the settings in the table", answers["B3"])
(pool,) = parse(r"(\d+) connections", answers["B4"])

Path("/app/migrate.py").write_text(f'''"""Migrates v1 INI service configs to the v2 JSON format (docs/config-v2.md).

    python3 migrate.py SRC_DIR DST_DIR    # every SRC_DIR/<name>.ini -> DST_DIR/<name>.json
"""

import configparser
import json
import sys
from pathlib import Path

TIMEOUT_FACTOR = {int(factor) if ms else 1}   # v1 seconds -> v2 unit
KEEP_EXPORT_PATH = {keep is not None}
CARRY_UNKNOWN = {carry is not None}
DEFAULT_POOL = {int(pool)}
KNOWN = {{("service", "name"), ("service", "owner"), ("server", "host"), ("server", "port"),
         ("server", "request_timeout"), ("database", "url"), ("database", "pool")}}
FLAGS = {{"yes": True, "true": True, "on": True, "no": False, "false": False, "off": False}}


def migrate(text):
    v1 = configparser.ConfigParser(interpolation=None)
    v1.read_string(text)
    server, database = v1["server"], v1["database"]
    doc = {{
        "version": 2,
        "service": {{"name": v1["service"]["name"], "owner": v1["service"]["owner"]}},
        "server": {{"listen": f"{{server['host']}}:{{server['port']}}",
                   "request_timeout": int(server["request_timeout"]) * TIMEOUT_FACTOR}},
        "database": {{"url": database["url"], "pool_size": int(database.get("pool", DEFAULT_POOL))}},
        "features": {{k: FLAGS[v.strip().lower()] for k, v in v1["features"].items()}} if v1.has_section("features") else {{}},
    }}
    if KEEP_EXPORT_PATH and v1.has_option("legacy", "export_path"):
        doc["exports"] = {{"path": v1["legacy"]["export_path"]}}
    extra = {{f"{{s}}.{{k}}": v for s in v1.sections() if s not in ("features", "legacy")
             for k, v in v1[s].items() if (s, k) not in KNOWN}}
    if CARRY_UNKNOWN and extra:
        doc["extra"] = extra
    return doc


def main(src, dst):
    dst.mkdir(parents=True, exist_ok=True)
    for path in sorted(src.glob("*.ini")):
        (dst / f"{{path.stem}}.json").write_text(json.dumps(migrate(path.read_text()), indent=2) + "\\n")
        print(f"{{path.name}} -> {{path.stem}}.json")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
''')
PY
python3 /app/migrate.py /app/configs/v1 /app/configs/v2
