#!/bin/bash
set -euo pipefail
cat > /app/greet.sh <<'SCRIPT'
#!/bin/bash
upper=0
if [ "${1:-}" = "-u" ]; then
    upper=1
    shift
fi
msg="Hello, ${1:-World}!"
if [ "$upper" -eq 1 ]; then
    msg=$(printf '%s' "$msg" | tr '[:lower:]' '[:upper:]')
fi
printf '%s\n' "$msg"
SCRIPT
chmod +x /app/greet.sh
