#!/bin/bash
# Builds the three deliverables from the read-only inputs (see build_pack.py).
set -euo pipefail
python3 /solution/build_pack.py
