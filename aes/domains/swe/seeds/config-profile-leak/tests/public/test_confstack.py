import pytest

from confstack import deep_merge, load, parse_env, parse_value


def test_dev_profile():
    assert load("dev", {}) == {
        "service": {"name": "orders", "port": 8080, "workers": 2},
        "db": {"host": "localhost", "port": 5432, "pool": {"min": 1, "max": 5}},
        "features": {"flags": ["audit"], "beta": False},
        "log": {"level": "debug", "sinks": ["stderr"]},
    }


def test_prod_profile_overrides_nested_keys():
    cfg = load("prod", {})
    assert cfg["db"] == {"host": "db.prod.internal", "port": 5432, "pool": {"min": 5, "max": 50}}
    assert cfg["log"]["sinks"] == ["stderr", "syslog"]
    assert cfg["service"]["workers"] == 8


def test_environment_overrides_win():
    cfg = load("dev", {"CONFSTACK_DB__PORT": "6543", "CONFSTACK_FEATURES__BETA": "true", "HOME": "/root"})
    assert cfg["db"]["port"] == 6543 and cfg["features"]["beta"] is True


def test_parse_env():
    assert parse_env({"APP_A__B": "1", "APP_C": "Off", "OTHER": "x"}, "APP_") == {"a": {"b": 1}, "c": False}
    assert parse_value(" 42 ") == 42 and parse_value("db.internal") == "db.internal"
    with pytest.raises(ValueError):
        parse_env({"APP_A____B": "1"}, "APP_")


def test_lists_are_replaced_not_concatenated():
    assert deep_merge({"a": [1, 2], "b": {"c": 1}}, {"a": [3]}) == {"a": [3], "b": {"c": 1}}


def test_unknown_profile():
    with pytest.raises(ValueError):
        load("qa", {})


def test_loading_staging_does_not_change_dev():
    # issue #23
    load("staging", {})
    assert load("dev", {})["db"]["host"] == "localhost"
