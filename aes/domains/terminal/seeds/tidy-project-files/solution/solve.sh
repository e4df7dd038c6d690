#!/bin/bash
set -euo pipefail
cd /app/project
find . -type f -name '*.sh' -exec chmod +x {} +
find . -type f -name '*.tmp' -delete
tar -czf /app/docs.tar.gz docs
find . -type f -size +4096c -printf '%P\n' | LC_ALL=C sort > /app/large_files.txt
