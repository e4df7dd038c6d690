"""Checks the saved brief (python-docx). Every test first requires that the file was saved again as
a Word document with a filled owner (the untouched brief still says [OWNER]), so doing nothing
scores 0."""

import zipfile

import pytest
from docx import Document
from docx.enum.text import WD_ALIGN_PARAGRAPH

DOC = "/app/decision-brief.docx"
KEPT = [
    "The Leeds and Bristol depots still run handheld scanners bought in 2017. Repairs now take nine days on "
    "average and two models are out of support.",
    "Budget: 48,000 EUR over two quarters",
    "Recommendation: replace all 64 units with the rugged model trialled in Leeds.",
]


@pytest.fixture(scope="module")
def paragraphs():
    assert zipfile.is_zipfile(DOC), "the brief is not a Word (.docx) file any more"
    paras = [p for p in Document(DOC).paragraphs if p.text.strip()]
    assert any(p.text.strip() == "Owner: Priya Raman" for p in paras), "the brief was not saved with the owner filled in"
    return paras


def _find(paragraphs, start):
    found = [p for p in paragraphs if p.text.strip().startswith(start)]
    assert len(found) == 1, f"expected one paragraph starting {start!r}, found {[p.text for p in found]}"
    return found[0]


def test_placeholders_are_filled(paragraphs):
    assert _find(paragraphs, "Decision date:").text.strip() == "Decision date: 14 March 2026"
    assert not any("[" in p.text for p in paragraphs)


def test_status_line_reads_approved(paragraphs):
    assert _find(paragraphs, "Status:").text.strip() == "Status: Approved"


def test_status_line_is_bold(paragraphs):
    para = _find(paragraphs, "Status:")
    runs = [r for r in para.runs if r.text.strip()]
    assert runs and all(r.bold or (r.bold is None and para.style.font.bold) for r in runs), \
        [(r.text, r.bold) for r in runs]


def test_heading_is_centred(paragraphs):
    heading = paragraphs[0]
    assert heading.text.strip() == "Decision Brief: Warehouse Scanner Refresh"
    assert heading.alignment == WD_ALIGN_PARAGRAPH.CENTER


def test_bookkeeping_other_lines_are_kept(paragraphs):
    texts = [p.text.strip() for p in paragraphs]
    assert texts[-3:] == KEPT and len(texts) == 7
    assert paragraphs[0].alignment != WD_ALIGN_PARAGRAPH.CENTER or all(
        p.alignment in (None, WD_ALIGN_PARAGRAPH.LEFT) for p in paragraphs[1:])
    assert not any(r.bold for p in paragraphs if p.text.strip() in KEPT for r in p.runs)
