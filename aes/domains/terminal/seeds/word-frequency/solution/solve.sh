#!/bin/bash
set -euo pipefail
in=/app/input/animals.txt
mkdir -p /app/answers
wc -l < "$in" | tr -d ' ' > /app/answers/lines.txt
sort -u "$in" | wc -l | tr -d ' ' > /app/answers/distinct.txt
sort "$in" | uniq -c | sort -k1,1nr -k2,2 | head -n 1 > /tmp/top
awk '{print $2}' /tmp/top > /app/answers/top.txt
awk '{print $1}' /tmp/top > /app/answers/top_count.txt
sort -u "$in" > /app/answers/sorted.txt
