#!/bin/bash
# Builds the review pack from the read-only inputs (see build_review.py).
set -euo pipefail
python3 /solution/build_review.py
