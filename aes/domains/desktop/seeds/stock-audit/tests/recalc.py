"""Evaluate a worksheet's formulas in the test itself, never trusting the values stored with them.

A saved workbook carries each formula's last computed value next to it, and whoever wrote the
file chose that value: a test that reads it (``openpyxl``'s ``data_only=True``) credits whatever
the file claims, and a constant formula (``=5147``) computes the right number without a model.
So tests of spreadsheet deliverables compute each checked cell from its formula here, from the
cells it references (formulas among them evaluated in turn), and again after moving inputs
(``changes``): a pasted value or a constant formula does not follow them.

The subset: numbers, cell references (``B2``, ``$B$2``, ``Sheet!B2`` naming the sheet itself; another sheet's
cells raise), ranges
inside functions (``B2:E2``), ``+ - * / ^``, unary minus, parentheses, percent, and ``SUM``,
``AVERAGE``, ``MIN``, ``MAX``, ``ABS``, ``ROUND``, ``PRODUCT``, ``COUNT``. Anything else raises
:class:`FormulaError` (the test fails and says which formula). Standard library only; copied
verbatim into a task's ``tests/`` (``aes/domains/kit/recalc.py`` is the original).

    from recalc import evaluate
    assert evaluate(ws, "F2") == 5147
    assert evaluate(ws, "F2", {"B2": 2240}) == 6147   # the total follows its inputs
"""

from __future__ import annotations

import math
import re

TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)|"
                   r"(?P<ref>(?:(?:'[^']+'|[A-Za-z_][\w.]*)!)?\$?[A-Za-z]{1,3}\$?\d+(?::\$?[A-Za-z]{1,3}\$?\d+)?)|"
                   r"(?P<name>[A-Za-z_][A-Za-z0-9_.]*)|(?P<op>[-+*/^(),%]))")
FUNCTIONS = {
    "SUM": lambda xs: math.fsum(xs),
    "AVERAGE": lambda xs: math.fsum(xs) / len(xs),
    "MIN": min,
    "MAX": max,
    "PRODUCT": math.prod,
    "COUNT": len,
}


class FormulaError(ValueError):
    """A formula outside the subset, a reference cycle, or text where a number is needed."""


def _cell_key(ref: str) -> str:
    return ref.split("!")[-1].replace("$", "").upper()


def _range(ref: str) -> list[str]:
    first, _, last = _cell_key(ref).partition(":")
    if not last:
        return [first]
    c1, r1 = re.match(r"([A-Z]+)(\d+)", first).groups()
    c2, r2 = re.match(r"([A-Z]+)(\d+)", last).groups()
    cols = range(min(_col(c1), _col(c2)), max(_col(c1), _col(c2)) + 1)
    rows = range(min(int(r1), int(r2)), max(int(r1), int(r2)) + 1)
    if len(cols) * len(rows) > 100_000:
        raise FormulaError(f"range {ref} is too large")
    return [f"{_letters(c)}{r}" for r in rows for c in cols]


def _col(letters: str) -> int:
    n = 0
    for ch in letters:
        n = n * 26 + ord(ch) - 64
    return n


def _letters(n: int) -> str:
    out = ""
    while n:
        n, rem = divmod(n - 1, 26)
        out = chr(65 + rem) + out
    return out


def _tokens(formula: str) -> list[tuple[str, str]]:
    text, pos, out = formula, 0, []
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise FormulaError(f"cannot read {formula!r} at {text[pos:pos + 12]!r}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, formula: str, value, title: str | None = None):
        self.formula, self.value, self.title = formula, value, title
        self.tokens, self.i = _tokens(formula), 0

    def same_sheet(self, ref: str) -> None:
        sheet = ref.rpartition("!")[0].strip("'")
        if sheet and self.title is not None and sheet.upper() != self.title.upper():
            raise FormulaError(f"{ref} is on another sheet (only {self.title}'s cells are evaluated)")

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else (None, None)

    def take(self, op=None):
        kind, text = self.peek()
        if kind is None or (op is not None and text != op):
            raise FormulaError(f"cannot read {self.formula!r}: expected {op or 'more'}")
        self.i += 1
        return kind, text

    def parse(self) -> float:
        result = self.additive()
        if self.i != len(self.tokens):
            raise FormulaError(f"cannot read {self.formula!r} past {self.tokens[self.i][1]!r}")
        return result

    def additive(self) -> float:
        left = self.term()
        while self.peek()[1] in ("+", "-"):
            op = self.take()[1]
            right = self.term()
            left = left + right if op == "+" else left - right
        return left

    def term(self) -> float:
        left = self.power()
        while self.peek()[1] in ("*", "/"):
            op = self.take()[1]
            right = self.power()
            if op == "/" and right == 0:
                raise FormulaError(f"division by zero in {self.formula!r}")
            left = left * right if op == "*" else left / right
        return left

    def power(self) -> float:
        left = self.unary()
        while self.peek()[1] == "^":
            self.take()
            left = left ** self.unary()
        return left

    def unary(self) -> float:
        if self.peek()[1] in ("-", "+"):
            sign = -1.0 if self.take()[1] == "-" else 1.0
            return sign * self.unary()
        result = self.atom()
        while self.peek()[1] == "%":
            self.take()
            result /= 100.0
        return result

    def atom(self) -> float:
        kind, text = self.take()
        if kind == "num":
            return float(text)
        if kind == "ref":
            if ":" in text:
                raise FormulaError(f"a range outside a function in {self.formula!r}")
            self.same_sheet(text)
            return self.value(_cell_key(text))
        if text == "(":
            result = self.additive()
            self.take(")")
            return result
        if kind == "name":
            return self.call(text.upper())
        raise FormulaError(f"cannot read {self.formula!r} at {text!r}")

    def call(self, name: str) -> float:
        self.take("(")
        args: list[float] = []
        if self.peek()[1] != ")":
            while True:
                kind, text = self.peek()
                after = self.tokens[self.i + 1][1] if self.i + 1 < len(self.tokens) else None
                if kind == "ref" and ":" in text and after in (",", ")"):
                    self.take()
                    self.same_sheet(text)
                    args.extend(self.value(cell, blank=None) for cell in _range(text))
                else:
                    args.append(self.additive())
                if self.peek()[1] != ",":
                    break
                self.take(",")
        self.take(")")
        numbers = [a for a in args if a is not None]
        if name in FUNCTIONS:
            if not numbers and name in ("AVERAGE", "MIN", "MAX"):
                raise FormulaError(f"{name} of nothing in {self.formula!r}")
            return float(FUNCTIONS[name](numbers))
        if name == "ABS" and len(numbers) == 1:
            return abs(numbers[0])
        if name == "ROUND" and len(numbers) in (1, 2):
            digits = int(numbers[1]) if len(numbers) == 2 else 0
            scaled = abs(numbers[0]) * 10 ** digits
            return math.copysign(math.floor(scaled + 0.5) / 10 ** digits, numbers[0])
        raise FormulaError(f"{name}() is not supported (in {self.formula!r})")


def evaluate(ws, cell: str, changes: dict | None = None) -> float:
    """The value of ``cell`` of worksheet ``ws`` (openpyxl, loaded with formulas) computed from its
    formula; ``changes`` ({cell: number}) replaces input cells first."""
    changes = {k.upper(): v for k, v in (changes or {}).items()}
    seen: dict[str, float] = {}
    active: set[str] = set()

    def value(key: str, blank=0.0):
        if key in changes:
            return float(changes[key])
        if key in seen:
            return seen[key]
        raw = ws[key].value
        raw = getattr(raw, "text", raw)  # an ArrayFormula's text
        if raw is None:
            return blank
        if isinstance(raw, bool):
            raise FormulaError(f"{key} holds a boolean where a number is needed")
        if isinstance(raw, (int, float)):
            return float(raw)
        if isinstance(raw, str) and raw.startswith("="):
            if key in active:
                raise FormulaError(f"{key} refers to itself")
            active.add(key)
            try:
                seen[key] = _Parser(raw[1:], value, getattr(ws, "title", None)).parse()
            finally:
                active.discard(key)
            return seen[key]
        raise FormulaError(f"{key} holds text ({str(raw)[:40]!r}) where a number is needed")

    return value(cell.replace("$", "").upper())


def references(formula) -> set[str]:
    """The cells a formula names (ranges expanded), e.g. ``{"B2", "C2"}`` for ``=SUM(B2:C2)``;
    empty for a constant formula or a value."""
    text = str(getattr(formula, "text", formula) or "")
    if not text.startswith("="):
        return set()
    found: set[str] = set()
    try:
        tokens = _tokens(re.sub(r'"[^"]*"', "", text[1:]))
    except FormulaError:
        return found
    for kind, token in tokens:
        if kind == "ref":
            found.update(_range(token))
    return found
