#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import json

def merge(base, over):
    out = dict(base)
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out

with open("/app/config/base.json") as f:
    config = json.load(f)
with open("/app/config/production.json") as f:
    config = merge(config, json.load(f))

with open("/app/config/overrides.env") as f:
    for line in f:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, raw = line.partition("=")
        path = name.split("__")[1:]
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        node = config
        for key in path[:-1]:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        node[path[-1]] = value

with open("/app/config/merged.json", "w") as f:
    json.dump(config, f, indent=2, sort_keys=True)
    f.write("\n")
PY
