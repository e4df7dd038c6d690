"""Price calculations for the shop."""


def subtotal(items):
    """Sum of price * quantity over (price, quantity) pairs."""
    return sum(price * qty for price, qty in items)


def apply_discount(price, percent):
    """price reduced by percent (0-100)."""
    if not 0 <= percent <= 100:
        raise ValueError("percent must be between 0 and 100")
    return price * (100 - percent) / 100


def add_tax(price, rate):
    """price plus rate percent of tax."""
    return price * (100 + rate) / 100
