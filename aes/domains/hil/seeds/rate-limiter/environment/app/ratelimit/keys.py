"""The API key table."""

from __future__ import annotations

import csv
from pathlib import Path


def load_keys(path: str | Path) -> dict[str, dict[str, str]]:
    """``{api_key: {"account": account_id, "plan": plan}}`` from a CSV with the columns
    api_key, account, plan."""
    with open(path, newline="") as f:
        return {row["api_key"]: {"account": row["account"], "plan": row["plan"]} for row in csv.DictReader(f)}
