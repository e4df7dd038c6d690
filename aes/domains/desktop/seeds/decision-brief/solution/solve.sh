#!/bin/bash
# The reference works in LibreOffice Writer through the GUI: xdotool keystrokes on the document's
# window (no library rewrites the file), a screenshot after each step in /logs/agent/screenshots/.
set -euo pipefail
export DISPLAY=${DISPLAY:-:0}
DOC=/app/decision-brief.docx
desktop-wait 240
xdotool windowactivate --sync "$(cat /run/desktop/ready)"
key() { xdotool key --clearmodifiers --delay 120 "$@"; desktop-settle || true; }
write() { xdotool type --clearmodifiers --delay 40 -- "$1"; desktop-settle || true; }
shot() { desktop-shot "$1" >/dev/null; }
shot opened

key ctrl+Home ctrl+e                                   # the heading: centred
shot heading-centred
key Down Home shift+End; write "Status: Approved"       # the status line, then bold
key Home shift+End ctrl+b
shot status-approved-bold
key Down Home shift+End; write "Owner: Priya Raman"
key Down Home shift+End; write "Decision date: 14 March 2026"
shot placeholders-filled

desktop-save "$DOC"                                    # Word format is kept (no format question)
shot saved
