#!/bin/bash
# The reference fix is solution/fix.patch (floor division in integers); apply it to the repository.
set -euo pipefail
cd /app/repo
git apply --whitespace=nowarn /solution/fix.patch || patch -p1 --forward < /solution/fix.patch
python3 -m pytest -q -p no:cacheprovider tests
