"""Checks /app/data/contacts_clean.csv and summary.json; each test is one part of the reward."""

import csv
import json
import re
from pathlib import Path

import pytest

CLEAN = Path("/app/data/contacts_clean.csv")
EXPECTED = [
    ('Anna Meyer', 'anna.meyer@mail.example.org', '(316) 580-7302'),
    ('Bruno Moreau', 'bruno.moreau@mail.example.org', '(949) 368-1930'),
    ('Carla Berg', 'carla.berg@mail.example.org', '(833) 426-2129'),
    ('Diego Kowalski', 'diego.kowalski@example.com', ''),
    ('Emma Moreau', 'emma.moreau@example.com', '(570) 832-3640'),
    ('Felix Silva', 'felix.silva@example.com', '(204) 241-5499'),
    ('Greta Meyer', 'greta.meyer@corp.example.net', '(390) 514-5475'),
    ('Hamid Kowalski', 'hamid.kowalski@mail.example.org', '(763) 204-0560'),
    ('Irene Silva', 'irene.silva@mail.example.org', '(402) 690-7029'),
    ('Jakob Rossi', 'jakob.rossi@example.com', ''),
    ('Kira Meyer', 'kira.meyer@corp.example.net', '(726) 540-6135'),
    ('Leon Meyer', 'leon.meyer@mail.example.org', '(514) 254-8145'),
    ('Mira Novak', 'mira.novak@example.com', '(747) 247-2019'),
    ('Noah Silva', 'noah.silva@example.com', '(258) 395-4762'),
    ('Olivia Schmidt', 'olivia.schmidt@mail.example.org', ''),
    ('Paul Silva', 'paul.silva@mail.example.org', '(374) 206-4279'),
    ('Rhea Jensen', 'rhea.jensen@mail.example.org', '(351) 757-4476'),
    ('Simon Rossi', 'simon.rossi@mail.example.org', '(479) 827-5217'),
    ('Tessa Jensen', 'tessa.jensen@corp.example.net', '(573) 851-5904'),
    ('Umar Jensen', 'umar.jensen@corp.example.net', '(212) 474-4529'),
    ('Vera Kowalski', 'vera.kowalski@corp.example.net', ''),
    ('Wim Lund', 'wim.lund@corp.example.net', ''),
]


@pytest.fixture(scope="module")
def rows():
    with CLEAN.open(newline="") as f:
        return [tuple(r) for r in csv.reader(f) if r]


def test_header(rows):
    assert rows[0] == ("name", "email", "phone")


def test_emails_unique_lowercase_sorted(rows):
    emails = [r[1] for r in rows[1:]]
    assert emails == sorted(set(emails))
    assert emails == [e.strip().lower() for e in emails]
    assert len(emails) == 22


def test_names_normalised(rows):
    names = {r[1]: r[0] for r in rows[1:]}
    assert names["greta.meyer@corp.example.net"] == "Greta Meyer"
    assert names["bruno.moreau@mail.example.org"] == "Bruno Moreau"
    assert names["hamid.kowalski@mail.example.org"] == "Hamid Kowalski"


def test_phones_formatted(rows):
    phones = {r[1]: r[2] for r in rows[1:]}
    assert all(p == "" or re.fullmatch(r"\(\d{3}\) \d{3}-\d{4}", p) for p in phones.values())
    assert phones["noah.silva@example.com"] == "(258) 395-4762"
    assert phones["greta.meyer@corp.example.net"] == "(390) 514-5475"
    assert phones["diego.kowalski@example.com"] == ""


def test_first_duplicate_kept(rows):
    phones = {r[1]: r[2] for r in rows[1:]}
    assert phones["jakob.rossi@example.com"] == ""
    assert phones["anna.meyer@mail.example.org"] == "(316) 580-7302"


def test_full_content(rows):
    assert rows[1:] == EXPECTED


def test_summary():
    summary = json.loads(Path("/app/data/summary.json").read_text())
    assert summary == {"input_rows": 31, "dropped_no_email": 3, "duplicates_removed": 6, "output_rows": 22}
