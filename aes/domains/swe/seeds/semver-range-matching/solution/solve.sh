#!/bin/bash
# The reference fix is solution/fix.patch (numeric ordering, caret on 0.x, highest match); apply it to the repository.
set -euo pipefail
cd /app/repo
git apply --whitespace=nowarn /solution/fix.patch || patch -p1 --forward < /solution/fix.patch
python3 -m pytest -q -p no:cacheprovider tests
