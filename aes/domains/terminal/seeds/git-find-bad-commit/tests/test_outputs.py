"""Checks the bisect answer and the revert in /app/repo; each test is one part of the reward."""

import subprocess
import sys
from pathlib import Path

REPO = "/app/repo"
BAD = "d636b895c77bf64e50db7352e4fa349236ac1eb0"
ORIGINAL_TIP = "2d954b3431833da8f61b65c98a8840fd5243788b"


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, timeout=30)


def pricing_call(expr):
    code = f"import sys; sys.path.insert(0, {REPO!r}); import pricing; print(repr({expr}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30).stdout.strip()


def test_bad_commit_identified():
    assert Path("/app/bad_commit.txt").read_text().strip() == BAD


def test_one_new_commit_on_original_history():
    assert git("rev-parse", "HEAD~1").stdout.strip() == ORIGINAL_TIP
    assert git("rev-parse", "--abbrev-ref", "HEAD").stdout.strip() == "main"


def test_discount_fixed():
    assert pricing_call("pricing.apply_discount(80, 25)") == "60.0"


def test_check_script_passes():
    result = subprocess.run([sys.executable, "check.py"], cwd=REPO, capture_output=True, timeout=30)
    assert result.returncode == 0


def test_fixed_and_later_features_kept():
    assert pricing_call("pricing.apply_discount(50, 10)") == "45.0"
    assert pricing_call("pricing.add_tax(100, 20)") == "120.0"
    assert pricing_call("pricing.bulk_discount(150)") == "15"
    assert pricing_call("pricing.format_price(3.5)") == "'3.50 EUR'"


def test_new_commit_clean_tree():
    assert git("rev-parse", "HEAD").stdout.strip() != ORIGINAL_TIP
    assert git("status", "--porcelain").stdout.strip() == ""
