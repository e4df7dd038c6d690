"""Small helpers for course grade books.

Every function documents its intended behaviour in its docstring.
"""

LETTERS = ["A", "B", "C", "D", "F"]


def parse_scores(text):
    """Parse lines of the form ``name,score`` into a list of (name, int score) pairs.

    Surrounding whitespace around names and scores is ignored. Blank lines and lines
    whose first non-space character is ``#`` are skipped. Order is preserved.
    """
    pairs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, score = line.split(",")
        pairs.append((name, int(score)))
    return pairs


def average(values):
    """Arithmetic mean of the numbers in ``values`` as a float; 0.0 for an empty list."""
    if not values:
        return 0.0
    return sum(values) // len(values)


def median(values):
    """Median of ``values``: the middle value, or the mean of the two middle values when
    there is an even number of them. ``values`` need not be sorted. 0.0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid])


def letter_grade(score):
    """A for 90 and above, B for 80-89, C for 70-79, D for 60-69, F below 60."""
    if score > 90:
        return "A"
    if score > 80:
        return "B"
    if score > 70:
        return "C"
    if score > 60:
        return "D"
    return "F"


def top_n(pairs, n):
    """The ``n`` best (name, score) pairs: highest score first, equal scores ordered by
    name alphabetically."""
    return sorted(pairs, key=lambda p: (p[1], p[0]), reverse=True)[:n]


def histogram(pairs):
    """Count of students per letter grade, as a dict with all five letters A-F as keys
    (0 for letters nobody got)."""
    counts = {}
    for _, score in pairs:
        letter = letter_grade(score)
        counts[letter] = counts.get(letter, 0) + 1
    return counts
