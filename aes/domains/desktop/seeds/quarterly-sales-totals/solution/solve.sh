#!/bin/bash
# The reference works in LibreOffice Calc through the GUI: xdotool keystrokes on the workbook's
# window (no library rewrites the file), a screenshot after each step in /logs/agent/screenshots/.
set -euo pipefail
export DISPLAY=${DISPLAY:-:0}
DOC=/app/quarterly-sales.xlsx
desktop-wait 240
xdotool windowactivate --sync "$(cat /run/desktop/ready)"
key() { xdotool key --clearmodifiers --delay 120 "$@"; desktop-settle || true; }
write() { xdotool type --clearmodifiers --delay 40 -- "$1"; desktop-settle || true; }
shot() { desktop-shot "$1" >/dev/null; }
shot opened

key ctrl+Home shift+Right shift+Right shift+Right shift+Right shift+Right ctrl+b   # A1:F1 bold
shot header-bold
key ctrl+Home Right Right Right Right Right Down       # F2
for row in 2 3 4 5; do write "=SUM(B$row:E$row)"; key Return; done
shot year-totals
key ctrl+Home Down Down Down Down Down Right           # B6
for col in B C D E F; do write "=SUM(${col}2:${col}5)"; key Tab; done
key Return
shot total-row

desktop-save "$DOC"                                    # Excel format is kept (no format question)
shot saved
