"""Writes the stock-audit workbook the task opens (run once at build time; fixed values)."""

import sys

from openpyxl import Workbook
from openpyxl.styles import Font

ROWS = [
    ("SKU", "Item", "On hand", "Counted", "Unit cost", "Variance", "Variance value"),
    ("BX-100", "Shipping box, small", 420, 408, 0.35),
    ("BX-200", "Shipping box, large", 185, 190, 0.80),
    ("TP-010", "Packing tape roll", 96, 91, 2.40),
    ("LB-550", "Thermal label pack", 60, 60, 6.75),
    ("WR-300", "Bubble wrap roll", 24, 21, 18.50),
    ("PL-900", "Pallet wrap", 12, 13, 22.00),
]

wb = Workbook()
ws = wb.active
ws.title = "Audit"
for row in ROWS:
    ws.append(row)
for cell in ws[1]:
    cell.font = Font(bold=True)
ws["A9"] = "Total variance value"
ws["A9"].font = Font(bold=True)
for col, width in zip("ABCDEFG", (10, 22, 10, 10, 10, 10, 16)):
    ws.column_dimensions[col].width = width
wb.save(sys.argv[1])
