"""Invoice arithmetic."""

from ledgerkit.money import invoice_totals, line_total, split_evenly

__all__ = ["invoice_totals", "line_total", "split_evenly"]
__version__ = "2.1.0"
