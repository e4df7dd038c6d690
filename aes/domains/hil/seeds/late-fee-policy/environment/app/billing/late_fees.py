"""Late fees on overdue invoices."""

from __future__ import annotations

from datetime import date


def late_fee(amount_cents: int, due: date, as_of: date) -> int:
    """The late fee, in whole cents, owed on an unpaid invoice of ``amount_cents`` that was due
    on ``due``, evaluated on ``as_of``."""
    raise NotImplementedError("late fees are not implemented yet")
