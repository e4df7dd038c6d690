"""The service's defaults and deployment profiles, and :func:`load`."""

from __future__ import annotations

import os
from collections.abc import Mapping

from confstack.env import parse_env
from confstack.merge import deep_merge

ENV_PREFIX = "CONFSTACK_"

DEFAULTS = {
    "service": {"name": "orders", "port": 8080, "workers": 2},
    "db": {"host": "localhost", "port": 5432, "pool": {"min": 1, "max": 5}},
    "features": {"flags": ["audit"], "beta": False},
    "log": {"level": "info", "sinks": ["stderr"]},
}

PROFILES = {
    "dev": {"log": {"level": "debug"}},
    "staging": {
        "db": {"host": "db.staging.internal", "pool": {"max": 20}},
        "features": {"beta": True},
    },
    "prod": {
        "service": {"workers": 8},
        "db": {"host": "db.prod.internal", "pool": {"min": 5, "max": 50}},
        "log": {"sinks": ["stderr", "syslog"]},
        "cache": {"backend": "redis", "ttl": 300},
    },
}


def load(profile: str, environ: Mapping[str, str] | None = None) -> dict:
    """The configuration of ``profile``: the defaults, the profile on top, then the overrides in
    ``environ`` (``os.environ`` when None) on top of both."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r} (known: {', '.join(sorted(PROFILES))})")
    overrides = parse_env(os.environ if environ is None else environ, ENV_PREFIX)
    return deep_merge(DEFAULTS, PROFILES[profile], overrides)
