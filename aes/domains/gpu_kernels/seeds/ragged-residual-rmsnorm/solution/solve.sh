#!/bin/bash
# The reference kernel, written where the task asks for it.
set -e
cp /solution/solution.py /app/solution.py
cd /app && python3 -c "import solution" && echo "solution.py in place"
