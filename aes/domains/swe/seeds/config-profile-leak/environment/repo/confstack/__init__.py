"""confstack: layered service configuration (defaults, a deployment profile, environment overrides)."""

from confstack.env import parse_env, parse_value
from confstack.merge import deep_merge
from confstack.profiles import DEFAULTS, ENV_PREFIX, PROFILES, load

__all__ = ["DEFAULTS", "ENV_PREFIX", "PROFILES", "deep_merge", "load", "parse_env", "parse_value"]
