"""Tables and files for validation reports."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from aes.admission import ValidationReport


def _reward(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_reports(reports: list[ValidationReport], console: Console | None = None,
                  title: str = "admission checks 1-4") -> None:
    """One row per task: verdict, oracle and no-op rewards, time, first reason."""
    console = console or Console()
    table = Table(title=title)
    for column in ("task", "valid", "oracle", "nop", "seconds", "reason"):
        table.add_column(column, overflow="fold")
    for r in reports:
        reason = str(r.reasons[0]) if r.reasons else ""
        if len(r.reasons) > 1:
            reason += f" (+{len(r.reasons) - 1} more)"
        table.add_row(r.name or r.task, "[green]yes[/]" if r.valid else "[red]no[/]",
                      _reward(r.oracle_reward), _reward(r.nop_reward), f"{r.seconds:.1f}",
                      reason[:300])
    console.print(table)
    for r in reports:
        for note in r.notes:
            if note.startswith("warning") or "exceeds" in note:
                console.print(f"[yellow]{r.name or r.task}: {note}[/]")
    valid = sum(r.valid for r in reports)
    console.print(f"{valid}/{len(reports)} valid")


def write_json(reports: list[ValidationReport], path: str | Path) -> None:
    """The ``--json`` file: a list with one object per task."""
    Path(path).write_text(json.dumps([r.to_json() for r in reports], indent=2) + "\n")
