#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import collections, datetime, json, pathlib, re

line_re = re.compile(r'^(\S+) \S+ \S+ \[(\d{2}/\w{3}/\d{4}):\d{2}:\d{2}:\d{2} [+-]\d{4}\] "[^"]*" (\d{3}) (\d+)$')
status, ips, errors = collections.Counter(), collections.Counter(), collections.Counter()
total = size = 0
for path in sorted(pathlib.Path("/app/logs").glob("*.log")):
    for line in path.read_text().splitlines():
        m = line_re.match(line.strip())
        if not m:
            continue
        ip, day, code, nbytes = m.groups()
        total += 1
        size += int(nbytes)
        status[code] += 1
        ips[ip] += 1
        if code.startswith("5"):
            errors[datetime.datetime.strptime(day, "%d/%b/%Y").strftime("%Y-%m-%d")] += 1
top = sorted(ips.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
report = {
    "total_requests": total,
    "status_counts": dict(status),
    "top_ips": [ip for ip, _ in top],
    "server_errors_by_day": dict(errors),
    "bytes_total": size,
}
pathlib.Path("/app/report.json").write_text(json.dumps(report, indent=2))
PY
