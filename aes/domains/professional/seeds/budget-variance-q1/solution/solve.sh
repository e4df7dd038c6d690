#!/bin/bash
# Builds the variance workbook and flagged.csv from the read-only inputs (see build_variance.py).
set -euo pipefail
python3 /solution/build_variance.py
