"""Checks /app/config/merged.json; each test is one part of the reward."""

import json
from pathlib import Path

import pytest

MERGED = Path("/app/config/merged.json")
EXPECTED = {
    "app": {"build": "2026.03", "debug": False, "features": ["export", "audit"], "name": "ledgerd",
            "region": "eu-west-1", "workers": 12},
    "cache": {"backend": {"kind": "redis", "url": "redis://cache-2.internal:6379/0"}, "enabled": True, "ttl": 60},
    "database": {"host": "db.internal", "name": "ledger", "password": "s3cr3t=v4lue",
                 "pool": {"max": 20, "min": 1}, "port": 6432},
    "logging": {"handlers": ["syslog"], "level": "warning"},
    "metrics": {"enabled": True, "port": 9100},
    "sentry": {"dsn": "https://key@sentry.internal/3", "sample_rate": 0.25},
}


@pytest.fixture(scope="module")
def merged():
    return json.loads(MERGED.read_text())


def test_database_section(merged):
    assert merged["database"] == EXPECTED["database"]


def test_app_section(merged):
    assert merged["app"] == EXPECTED["app"]


def test_logging_section_null_removes_key(merged):
    assert merged["logging"] == EXPECTED["logging"]


def test_cache_nested_merge(merged):
    assert merged["cache"] == EXPECTED["cache"]


def test_env_values_are_typed(merged):
    assert merged["metrics"]["enabled"] is True
    assert merged["database"]["port"] == 6432 and not isinstance(merged["database"]["port"], str)


def test_whole_document(merged):
    assert merged == EXPECTED


def test_sorted_keys_and_indent():
    text = MERGED.read_text()

    def check(pairs):
        keys = [k for k, _ in pairs]
        assert keys == sorted(keys)
        return dict(pairs)

    json.loads(text, object_pairs_hook=check)
    assert text.splitlines()[1].startswith('  "') and not text.splitlines()[1].startswith('   ')
