"""Writes the brief the task opens (run once at build time; fixed text, so every build is the same)."""

import sys

from docx import Document

doc = Document()
doc.add_paragraph("Decision Brief: Warehouse Scanner Refresh")
doc.add_paragraph("Status: PENDING REVIEW")
doc.add_paragraph("Owner: [OWNER]")
doc.add_paragraph("Decision date: [DATE]")
doc.add_paragraph("The Leeds and Bristol depots still run handheld scanners bought in 2017. Repairs now take "
                  "nine days on average and two models are out of support.")
doc.add_paragraph("Budget: 48,000 EUR over two quarters")
doc.add_paragraph("Recommendation: replace all 64 units with the rugged model trialled in Leeds.")
doc.save(sys.argv[1])
