"""Terminal tables for rollouts, calibration and evaluation."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_table(title: str, columns: list[str], rows: list[list[object]], console: Console | None = None) -> None:
    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*[_num(c) if isinstance(c, float) or c is None else str(c) for c in row])
    (console or Console()).print(table)
