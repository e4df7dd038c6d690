"""Checks that /app/output was created as a directory."""

import os
import stat
from pathlib import Path

OUTPUT = Path("/app/output")


def test_output_exists():
    assert OUTPUT.exists()


def test_output_is_a_directory():
    assert OUTPUT.is_dir()


def test_output_is_readable_and_listable():
    mode = OUTPUT.stat().st_mode
    assert stat.S_ISDIR(mode) and os.access(OUTPUT, os.R_OK | os.X_OK)
