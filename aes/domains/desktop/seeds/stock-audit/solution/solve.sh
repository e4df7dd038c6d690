#!/bin/bash
# The reference works in LibreOffice Calc through the GUI: xdotool keystrokes on the workbook's
# window (no library rewrites the file), a screenshot after each step in /logs/agent/screenshots/.
set -euo pipefail
export DISPLAY=${DISPLAY:-:0}
DOC=/app/stock-audit.xlsx
desktop-wait 240
xdotool windowactivate --sync "$(cat /run/desktop/ready)"
key() { xdotool key --clearmodifiers --delay 120 "$@"; desktop-settle || true; }
write() { xdotool type --clearmodifiers --delay 40 -- "$1"; desktop-settle || true; }
shot() { desktop-shot "$1" >/dev/null; }
shot opened

key ctrl+Home Right Right Right Right Right Down       # F2
for row in 2 3 4 5 6 7; do write "=D$row-C$row"; key Return; done
shot variance
key ctrl+Home Right Right Right Right Right Right Down # G2
for row in 2 3 4 5 6 7; do write "=F$row*E$row"; key Return; done
shot variance-value
key Down                                               # G9
write "=SUM(G2:G7)"; key Return
shot total

desktop-save "$DOC"                                    # Excel format is kept (no format question)
shot saved
