"""Runs /app/greet.sh with several inputs; each test is one part of the reward."""

import os
import subprocess
from pathlib import Path

SCRIPT = Path("/app/greet.sh")


def run(*args):
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=10)


def test_script_exists_with_shebang():
    assert SCRIPT.read_text().startswith("#!/bin/bash")


def test_script_is_executable():
    assert os.access(SCRIPT, os.X_OK)


def test_no_arguments():
    result = run()
    assert result.returncode == 0 and result.stdout == "Hello, World!\n"


def test_one_name():
    result = run("Zoe")
    assert result.returncode == 0 and result.stdout == "Hello, Zoe!\n"


def test_name_with_space():
    result = run("Ada Lovelace")
    assert result.returncode == 0 and result.stdout == "Hello, Ada Lovelace!\n"


def test_upper_case_option():
    result = run("-u", "Grace")
    assert result.returncode == 0 and result.stdout == "HELLO, GRACE!\n"
