"""Sanity checks for pricing.py: exits 0 when all pass, 1 otherwise."""
import sys

import pricing

CASES = [
    (pricing.subtotal([(2.5, 4), (1.0, 3)]), 13.0),
    (pricing.apply_discount(80, 25), 60.0),
    (pricing.apply_discount(19.99, 0), 19.99),
    (pricing.add_tax(100, 20), 120.0),
]

failed = [i for i, (got, want) in enumerate(CASES) if abs(got - want) > 1e-9]
print("failed cases:", failed if failed else "none")
sys.exit(1 if failed else 0)
