"""Fixed-width time windows over integer nanosecond timestamps."""

from telemetry.aggregate import Window, bucket
from telemetry.windows import window_bounds, window_index, window_start, windows_between

__all__ = ["Window", "bucket", "window_bounds", "window_index", "window_start", "windows_between"]
__version__ = "0.4.0"
