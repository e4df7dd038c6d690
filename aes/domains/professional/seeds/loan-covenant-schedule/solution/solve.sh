#!/bin/bash
# Builds the credit pack from the read-only inputs (see build_credit_pack.py).
set -euo pipefail
python3 /solution/build_credit_pack.py
