"""Money arithmetic on decimal strings (see README.md for the rounding rule FP-7)."""

from __future__ import annotations


def _number(value, what: str) -> float:
    if isinstance(value, float):
        raise TypeError(f"{what} must be a decimal string or an int, not a float")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"{what} must be a decimal string or an int, got {type(value).__name__}")
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{what} is not a number: {value!r}") from None


def _cents(amount: float) -> str:
    return f"{round(amount, 2):.2f}"


def line_total(quantity, unit_price) -> str:
    """``quantity * unit_price`` rounded to the cent (FP-7)."""
    return _cents(_number(quantity, "quantity") * _number(unit_price, "unit_price"))


def invoice_totals(lines, tax_rate) -> dict[str, str]:
    """Subtotal of the rounded line totals, tax on the subtotal, and the total (FP-7)."""
    rate = _number(tax_rate, "tax_rate")
    subtotal = sum(float(line_total(q, p)) for q, p in lines)
    tax = float(_cents(subtotal * rate))
    return {"subtotal": _cents(subtotal), "tax": _cents(tax), "total": _cents(subtotal + tax)}


def split_evenly(amount, parts: int) -> list[str]:
    """``parts`` amounts that differ by at most a cent and add up to ``amount``, larger first."""
    if isinstance(parts, bool) or not isinstance(parts, int) or parts <= 0:
        raise ValueError(f"parts must be a positive int, got {parts!r}")
    cents = int(_number(amount, "amount") * 100)
    base, extra = divmod(cents, parts)
    return [f"{(base + (1 if i < extra else 0)) / 100:.2f}" for i in range(parts)]
