#!/bin/bash
set -euo pipefail
mkdir -p /app/output
printf 'hello world\n' > /app/output/greeting.txt
chmod 644 /app/output/greeting.txt
: > /app/output/DONE
