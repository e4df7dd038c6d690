#!/bin/bash
# Builds /app/repo with a fixed history (fixed names and dates, so the hashes are stable).
set -euo pipefail
H=/app/history
mkdir -p /app/repo
cd /app/repo
git init -q -b main
git config user.name "Shop Dev"
git config user.email "dev@shop.example"
n=0
commit() {
    n=$((n + 1))
    export GIT_AUTHOR_DATE="2026-01-$(printf %02d "$n")T10:00:00+0000"
    export GIT_COMMITTER_DATE="$GIT_AUTHOR_DATE"
    git add -A
    git commit -q -m "$1"
}
cp $H/01_pricing.py pricing.py
commit "Initial pricing module"

printf '# shop-pricing\n\nPrice helpers for the shop backend.\n' > README.md
printf '__pycache__/\n*.pyc\n' > .gitignore
commit "Add README and gitignore"

cp $H/03_check.py check.py
commit "Add sanity check script"

cat >> pricing.py <<'PY'


def shipping(weight_kg):
    """Flat 4.90 up to 2 kg, then 1.50 per started kg."""
    if weight_kg <= 2:
        return 4.90
    return 4.90 + 1.50 * -(-(weight_kg - 2) // 1)
PY
commit "Add shipping cost helper"

printf '1.1.0\n' > VERSION
commit "Add VERSION file"

python3 - <<'PY'
from pathlib import Path
p = Path("pricing.py")
s = p.read_text()
s = s.replace('"""Price calculations for the shop."""\n',
              '"""Price calculations for the shop."""\n\n\ndef _fraction(percent):\n    return percent / 100\n')
s = s.replace("    return price * (100 - percent) / 100\n", "    return price - _fraction(percent)\n")
s = s.replace("    return price * (100 + rate) / 100\n", "    return price * (1 + _fraction(rate))\n")
p.write_text(s)
PY
commit "Refactor percentage maths into a helper"

cat >> pricing.py <<'PY'


def bulk_discount(quantity):
    """Percent off for large orders."""
    if quantity >= 100:
        return 15
    if quantity >= 20:
        return 5
    return 0
PY
commit "Add bulk order discount tiers"

printf '# shop-pricing\n\nPrice helpers for the shop backend.\n\nRun `python3 check.py` before pushing.\n' > README.md
commit "Document the check script"

cat >> pricing.py <<'PY'


def format_price(amount, currency="EUR"):
    """Two decimals and the currency code, e.g. '12.50 EUR'."""
    return f"{amount:.2f} {currency}"
PY
commit "Add price formatting"

printf '1.2.0\n' > VERSION
commit "Release 1.2.0"

printf '# Changelog\n\n## 1.2.0\n- bulk discounts\n- price formatting\n' > CHANGELOG.md
commit "Add changelog"

printf '\nShipping: 4.90 up to 2 kg, 1.50 per further kg.\n' >> README.md
commit "Document shipping rates"
rm -rf /app/history
