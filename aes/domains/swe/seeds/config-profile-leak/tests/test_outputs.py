"""Private tests of the confstack fix: loads independent of earlier loads, of earlier environment
overrides and of what callers did with earlier results (also for a section only a profile has),
deep_merge leaving its arguments alone and sharing nothing with them, the merge rules, and the
unchanged API and validation.
Each test is one part of the reward, which tests/test.sh gives only once the repository's public
tests pass and test_gate_* (the issue's rule, on cases the public tests do not show) passes: both fail on the repository as built, so
doing nothing earns 0. The package runs in a child process as another user (tests/untrusted.py)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from untrusted import Untrusted, raises  # noqa: E402

REPO = "/app/repo"

DEV = {
    "service": {"name": "orders", "port": 8080, "workers": 2},
    "db": {"host": "localhost", "port": 5432, "pool": {"min": 1, "max": 5}},
    "features": {"flags": ["audit"], "beta": False},
    "log": {"level": "debug", "sinks": ["stderr"]},
}
STAGING = {
    "service": {"name": "orders", "port": 8080, "workers": 2},
    "db": {"host": "db.staging.internal", "port": 5432, "pool": {"min": 1, "max": 20}},
    "features": {"flags": ["audit"], "beta": True},
    "log": {"level": "info", "sinks": ["stderr"]},
}
PROD = {
    "service": {"name": "orders", "port": 8080, "workers": 8},
    "db": {"host": "db.prod.internal", "port": 5432, "pool": {"min": 5, "max": 50}},
    "features": {"flags": ["audit"], "beta": False},
    "log": {"level": "info", "sinks": ["stderr", "syslog"]},
    "cache": {"backend": "redis", "ttl": 300},
}


PROBE = """
import confstack


def containers(value, found=None):
    found = set() if found is None else found
    if isinstance(value, (dict, list)):
        found.add(id(value))
        for item in value.values() if isinstance(value, dict) else value:
            containers(item, found)
    return found


def change_a_loaded_config():
    # loads after a caller changed a loaded config, and the ids of both configs' containers
    cfg = confstack.load("prod", {})
    cfg["log"]["sinks"].append("file")
    cfg["features"]["flags"].append("dark-launch")
    cfg["db"]["pool"]["max"] = 1
    cfg["service"]["workers"] = 1
    prod, dev = confstack.load("prod", {}), confstack.load("dev", {})
    other = confstack.load("prod", {})
    return prod, dev, sorted(containers(cfg)), sorted(containers(other))


def change_a_profile_only_section():
    confstack.load("prod", {})["cache"]["backend"] = "memcached"
    return confstack.PROFILES["prod"]["cache"], confstack.load("prod", {})


def merge_and_change(base, mid, top):
    # deep_merge's result, its arguments afterwards, the container ids of both, and the
    # arguments after the result's lists were appended to
    merged = confstack.deep_merge(base, mid, top)
    result = repr(merged)
    after = repr((base, mid, top))
    ids = sorted(containers(merged)), sorted(containers(base) | containers(mid) | containers(top))
    merged["a"]["keep"].append(1)
    merged["t"].append(8)
    return result, after, ids, repr((base, mid, top))
"""


@pytest.fixture(scope="module")
def child():
    """The package, imported in a child process as an unprivileged user (tests/untrusted.py):
    its code never runs in this process, which decides the reward."""
    with Untrusted([REPO], helpers={"probe": PROBE}) as untrusted:
        yield untrusted


@pytest.fixture(scope="module")
def cs(child):
    return child.module("confstack")


@pytest.fixture(scope="module")
def probe(child):
    return child.module("probe")


def test_gate_the_issue_is_fixed(cs):
    """Issue #23's rule on its own case and on the cases it states that the public tests do not show
    (earns nothing itself: while it fails the reward is 0, so special-casing the issue's example
    earns nothing)."""
    cs.load("staging", {})
    assert cs.load("dev", {})["db"]["host"] == "localhost"
    cs.load("dev", {"CONFSTACK_DB__POOL__MAX": "9"})
    assert cs.load("dev", {}) == DEV
    assert cs.load("prod", {}) == PROD
    assert cs.load("staging", {}) == STAGING


def test_loads_do_not_depend_on_earlier_loads(cs):
    for profile, expected in (("staging", STAGING), ("prod", PROD), ("dev", DEV), ("staging", STAGING),
                              ("dev", DEV), ("prod", PROD)):
        assert cs.load(profile, {}) == expected, profile


def test_environment_overrides_do_not_stick(cs):
    cfg = cs.load("dev", {"CONFSTACK_DB__POOL__MAX": "9", "CONFSTACK_LOG__SINKS": "file",
                          "CONFSTACK_FEATURES__BETA": "on"})
    assert cfg["db"]["pool"] == {"min": 1, "max": 9} and cfg["log"]["sinks"] == "file"
    assert cfg["features"]["beta"] is True
    assert cs.load("dev", {}) == DEV
    assert cs.load("staging", {"CONFSTACK_DB__HOST": "10.0.0.7"})["db"]["host"] == "10.0.0.7"
    assert cs.load("staging", {}) == STAGING


def test_changing_a_loaded_config_changes_nothing_else(probe):
    prod, dev, changed, other = probe.change_a_loaded_config()
    assert prod == PROD
    assert dev == DEV
    assert set(changed).isdisjoint(other)


def test_sections_only_a_profile_has_stay_isolated(cs, probe):
    assert cs.load("prod", {"CONFSTACK_CACHE__TTL": "60"})["cache"] == {"backend": "redis", "ttl": 60}
    assert cs.load("prod", {})["cache"] == {"backend": "redis", "ttl": 300}
    profile, again = probe.change_a_profile_only_section()
    assert profile == {"backend": "redis", "ttl": 300}
    assert again == PROD


def test_deep_merge_leaves_its_arguments_alone(probe):
    base = {"a": {"b": {"c": 1, "l": [1, 2]}, "keep": [0]}, "s": "x"}
    mid = {"a": {"b": {"c": 2}, "new": {"n": [5]}}, "t": [7]}
    top = {"a": {"b": {"l": [3]}, "new": {"m": 1}}, "s": {"now": "a dict"}}
    snapshot = repr((base, mid, top))
    merged, after, (merged_ids, argument_ids), after_changes = probe.merge_and_change(base, mid, top)
    assert merged == repr({"a": {"b": {"c": 2, "l": [3]}, "keep": [0], "new": {"n": [5], "m": 1}},
                           "s": {"now": "a dict"}, "t": [7]})
    assert after == snapshot
    assert set(merged_ids).isdisjoint(argument_ids)
    assert after_changes == snapshot


def test_merge_rules(cs):
    assert cs.deep_merge({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}
    assert cs.deep_merge({"a": {"b": 1}}, {"a": 5}) == {"a": 5}
    assert cs.deep_merge({"a": 5}, {"a": {"b": 1}}) == {"a": {"b": 1}}
    assert cs.deep_merge({"a": {"b": 1}}, {"a": None}) == {"a": None}
    assert cs.deep_merge({"a": 1}, {"a": 2}, {"a": 3}) == {"a": 3}
    assert cs.deep_merge({"a": {"b": 1}}) == {"a": {"b": 1}} and cs.deep_merge({}, {}) == {}


def test_api_and_validation_unchanged(cs):
    assert set(cs.value("__all__")) >= {"DEFAULTS", "PROFILES", "deep_merge", "load", "parse_env", "parse_value"}
    assert raises(TypeError, cs.deep_merge, {"a": 1}, [("a", 2)])
    assert raises(TypeError, cs.deep_merge, {"a": 1}, {1: 2})
    assert raises(ValueError, cs.load, "qa", {})
    for name in ("CONFSTACK_DB____PORT", "CONFSTACK_", "CONFSTACK_DB__"):
        assert raises(ValueError, cs.load, "dev", {name: "1"})
    assert cs.parse_env({"X_A__B": "Yes", "X_C": "-3", "Y_D": "1"}, "X_") == {"a": {"b": True}, "c": -3}
    assert cs.parse_value("db.internal") == "db.internal"
