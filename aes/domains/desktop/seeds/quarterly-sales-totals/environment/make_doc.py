"""Writes the sales workbook the task opens (run once at build time; fixed figures, plain header)."""

import sys

from openpyxl import Workbook

ROWS = [
    ("Region", "Q1", "Q2", "Q3", "Q4", "Year"),
    ("North", 1240, 1315, 1190, 1402),
    ("South", 980, 1044, 1102, 1213),
    ("East", 1530, 1488, 1611, 1575),
    ("West", 705, 760, 812, 798),
    ("Total",),
]

wb = Workbook()
ws = wb.active
ws.title = "Sales"
for row in ROWS:
    ws.append(row)
wb.save(sys.argv[1])
