#!/bin/bash
set -euo pipefail
touch /app/a.txt /app/b.txt
