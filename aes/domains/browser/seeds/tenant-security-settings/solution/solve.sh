#!/bin/bash
# The reference drives the console's pages in headless Chromium; screenshots go to /logs/agent/screenshots/.
set -euo pipefail
python3 /solution/solve.py
