#!/bin/bash
# The reference works in LibreOffice Writer through the GUI: xdotool keystrokes on the document's
# window (Ctrl+1 / Ctrl+2 apply the Heading 1 / Heading 2 paragraph styles; no library rewrites the
# file), a screenshot after each step in /logs/agent/screenshots/.
set -euo pipefail
export DISPLAY=${DISPLAY:-:0}
DOC=/app/meeting-notes.odt
desktop-wait 240
xdotool windowactivate --sync "$(cat /run/desktop/ready)"
key() { xdotool key --clearmodifiers --delay 120 "$@"; desktop-settle || true; }
write() { xdotool type --clearmodifiers --delay 40 -- "$1"; desktop-settle || true; }
shot() { desktop-shot "$1" >/dev/null; }
shot opened

key ctrl+Home ctrl+1                                   # the title: Heading 1
shot title-heading-1
key Down Down Home shift+End; write "Chair: Marta Kowalski"
shot chair
key Down Home ctrl+2                                   # Agenda: Heading 2
key Down Down Down Home ctrl+2                         # Action items: Heading 2
shot sections-heading-2

desktop-save "$DOC"
shot saved
