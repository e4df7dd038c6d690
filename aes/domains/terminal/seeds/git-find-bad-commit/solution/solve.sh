#!/bin/bash
set -euo pipefail
cd /app/repo
first=$(git rev-list --max-parents=0 HEAD)
# check.py arrived after the first commit; bisect from the first commit that has it and passes.
good=$(git log --reverse --format=%H -- check.py | head -n 1)
git bisect start HEAD "$good" >/dev/null
git bisect run python3 check.py >/tmp/bisect.log 2>&1 || true
bad=$(sed -n 's/^\([0-9a-f]\{40\}\) is the first bad commit$/\1/p' /tmp/bisect.log | head -n 1)
git bisect reset >/dev/null
[ -n "$bad" ] || { echo "bisect found nothing; first commit $first" >&2; exit 1; }
printf '%s\n' "$bad" > /app/bad_commit.txt
git revert --no-edit "$bad"
python3 check.py
