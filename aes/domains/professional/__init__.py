"""The professional-work domain (paper App. C): read-only inputs and deliverables a professional
would hand over (a workbook with live formulas, a CSV, a PDF memo); see instructions/ and checks.py."""
