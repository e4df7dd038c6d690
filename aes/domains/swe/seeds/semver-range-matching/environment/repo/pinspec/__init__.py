"""Version specifiers for pinned dependencies."""

from pinspec.ranges import max_satisfying, satisfies
from pinspec.version import compare, parse_version

__all__ = ["compare", "max_satisfying", "parse_version", "satisfies"]
__version__ = "1.3.0"
