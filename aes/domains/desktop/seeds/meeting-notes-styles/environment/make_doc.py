"""Writes the meeting notes the task opens (run once at build time; fixed text, every line a plain
paragraph in the default style)."""

import sys

from odf.opendocument import OpenDocumentText
from odf.text import P

LINES = [
    "Site Safety Committee Meeting Notes",
    "Date: 9 February 2026",
    "Chair: TBD",
    "Agenda",
    "Review of the January incident log.",
    "Forklift training schedule for the spring.",
    "Action items",
    "Book the refresher course with the training provider.",
    "Replace the worn floor markings in bay 4.",
]

doc = OpenDocumentText()
for line in LINES:
    doc.text.addElement(P(text=line))
doc.save(sys.argv[1])
