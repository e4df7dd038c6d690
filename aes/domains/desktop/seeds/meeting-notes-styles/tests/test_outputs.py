"""Checks the saved notes (odfpy): which lines are headings of which outline level, and their text.
Every test first requires that the notes hold at least one heading (the untouched notes have none),
so doing nothing scores 0."""

import pytest
from odf import teletype
from odf.namespaces import TEXTNS
from odf.opendocument import load

DOC = "/app/meeting-notes.odt"
BODY = ["Date: 9 February 2026", "Review of the January incident log.", "Forklift training schedule for the spring.",
        "Book the refresher course with the training provider.", "Replace the worn floor markings in bay 4."]


@pytest.fixture(scope="module")
def blocks():
    doc = load(DOC)
    out = []
    for node in doc.text.childNodes:
        if node.qname == (TEXTNS, "h"):
            out.append((int(node.getAttrNS(TEXTNS, "outline-level") or 0), teletype.extractText(node).strip()))
        elif node.qname == (TEXTNS, "p"):
            text = teletype.extractText(node).strip()
            if text:
                out.append((0, text))
    assert any(level for level, _ in out), "the notes were not saved with any heading"
    return out


def test_title_is_heading_1(blocks):
    assert blocks[0] == (1, "Site Safety Committee Meeting Notes")


def test_sections_are_heading_2(blocks):
    assert (2, "Agenda") in blocks and (2, "Action items") in blocks


def test_no_other_headings(blocks):
    assert [b for b in blocks if b[0]] == [(1, "Site Safety Committee Meeting Notes"), (2, "Agenda"),
                                            (2, "Action items")]


def test_chair_is_filled_in(blocks):
    assert (0, "Chair: Marta Kowalski") in blocks and not any("TBD" in t for _, t in blocks)


def test_bookkeeping_other_lines_are_kept_in_order(blocks):
    assert [t for level, t in blocks if not level and not t.startswith("Chair:")] == BODY
