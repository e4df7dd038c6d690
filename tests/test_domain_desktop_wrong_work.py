"""Only the substance reaches 0.5 in the desktop domain (issue 25): three wrong-but-plausible attempts
per seed, each run as the agent would run it in the seed's own image (keystrokes in the open
LibreOffice window, or the document rewritten with a zip library: the domain trains producing the
document, so that route is legitimate and only its content is judged) - the values typed but not the
formatting, the edits on the wrong lines, totals typed as constants, one of several items left
undone - earn under 0.5 from the seed's real tests, while the document really was saved again."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from aes.sandbox import OracleAgent, TrialRunner
from aes.tasks import find_tasks, load_task

SEEDS = Path(__file__).resolve().parents[1] / "aes" / "domains" / "desktop" / "seeds"

# What every attempt starts with: the reference's own way into the window, and its save (the kit's
# desktop-save), which prints SAVED only once the document's modification time (nanoseconds) or size changed.
HEAD = '''#!/bin/bash
set -euo pipefail
export DISPLAY=${DISPLAY:-:0}
DOC=%s
desktop-wait 240
xdotool windowactivate --sync "$(cat /run/desktop/ready)"
key() { xdotool key --clearmodifiers --delay 120 "$@"; desktop-settle || true; }
write() { xdotool type --clearmodifiers --delay 40 -- "$1"; desktop-settle || true; }
stamp() { stat -c '%%y %%s' "$DOC"; }
save() { desktop-save "$DOC" 30 && echo SAVED || { echo "the document was never saved"; exit 1; }; }
'''
DOCUMENTS = {"decision-brief": "/app/decision-brief.docx", "meeting-notes-styles": "/app/meeting-notes.odt",
             "quarterly-sales-totals": "/app/quarterly-sales.xlsx", "stock-audit": "/app/stock-audit.xlsx"}

# The brief's XML rewritten with the standard library, as an agent that never opens the window would.
ZIP_VALUES = r'''before=$(stamp)
python3 - "$DOC" <<'PY'
import sys, zipfile
doc = sys.argv[1]
with zipfile.ZipFile(doc) as z:
    parts = {i: z.read(i) for i in z.infolist()}
for info in parts:
    if info.filename == "word/document.xml":
        xml = parts[info].decode()
        for old, new in (("[OWNER]", "Priya Raman"), ("[DATE]", "14 March 2026"), ("PENDING REVIEW", "Approved")):
            assert old in xml, old
            xml = xml.replace(old, new)
        parts[info] = xml.encode()
with zipfile.ZipFile("/tmp/brief.docx", "w", zipfile.ZIP_DEFLATED) as z:
    for info, data in parts.items():
        z.writestr(info, data)
with open("/tmp/brief.docx", "rb") as new, open(doc, "wb") as out:
    out.write(new.read())
PY
[ "$(stamp)" != "$before" ] && echo SAVED
'''

WRONG = {
    "decision-brief": {
        # the values typed in the XML; the status line not bold, the heading not centred
        "zip-values-no-formatting": ZIP_VALUES,
        # every edit but the date: [DATE] is still there
        "all-but-the-date": '''
key ctrl+Home ctrl+e
key Down Home shift+End; write "Status: Approved"
key Home shift+End ctrl+b
key Down Home shift+End; write "Owner: Priya Raman"
save''',
        # the text right, the formatting on the wrong lines: the heading bold, the status line centred
        "formatting-on-the-wrong-lines": '''
key ctrl+Home Home shift+End ctrl+b
key Down Home shift+End; write "Status: Approved"
key ctrl+e
key Down Home shift+End; write "Owner: Priya Raman"
key Down Home shift+End; write "Decision date: 14 March 2026"
save''',
    },
    "meeting-notes-styles": {
        # the first item only: the title as Heading 1
        "title-only": '''
key ctrl+Home ctrl+1
save''',
        # every style right, the chair left as TBD
        "styles-without-the-chair": '''
key ctrl+Home ctrl+1
key Down Down Down Home ctrl+2
key Down Down Down Home ctrl+2
save''',
        # the title and the chair right, Heading 2 one line too low (on the first line of each section)
        "sections-one-line-off": '''
key ctrl+Home ctrl+1
key Down Down Home shift+End; write "Chair: Marta Kowalski"
key Down Down Home ctrl+2
key Down Down Down Home ctrl+2
save''',
    },
    "quarterly-sales-totals": {
        # the case: every formula right, the header not bold
        "formulas-without-the-bold-header": '''
key ctrl+Home Right Right Right Right Right Down
for row in 2 3 4 5; do write "=SUM(B$row:E$row)"; key Return; done
key ctrl+Home Down Down Down Down Down Right
for col in B C D E F; do write "=SUM(${col}2:${col}5)"; key Tab; done
key Return
save''',
        # the header bold, every total worked out elsewhere and typed as a constant formula
        "constant-totals": '''
key ctrl+Home shift+Right shift+Right shift+Right shift+Right shift+Right ctrl+b
key ctrl+Home Right Right Right Right Right Down
for v in 5147 4339 6204 3075; do write "=$v"; key Return; done
key ctrl+Home Down Down Down Down Down Right
for v in 4455 4607 4715 4988 18765; do write "=$v"; key Tab; done
key Return
save''',
        # the header bold and the year totals; the total row forgotten
        "year-totals-only": '''
key ctrl+Home shift+Right shift+Right shift+Right shift+Right shift+Right ctrl+b
key ctrl+Home Right Right Right Right Right Down
for row in 2 3 4 5; do write "=SUM(B$row:E$row)"; key Return; done
save''',
    },
    "stock-audit": {
        # the variance as formulas, the variance values typed in as numbers, the total a SUM of them
        "values-typed-in": '''
key ctrl+Home Right Right Right Right Right Down
for row in 2 3 4 5 6 7; do write "=D$row-C$row"; key Return; done
key ctrl+Home Right Right Right Right Right Right Down
for v in -4.2 4 -12 0 -55.5 22; do write "$v"; key Return; done
key Down
write "=SUM(G2:G7)"; key Return
save''',
        # the first of six items only, and the total
        "first-row-only": '''
key ctrl+Home Right Right Right Right Right Down
write "=D2-C2"; key Tab
write "=F2*E2"; key Return
key ctrl+Home Right Right Right Right Right Right Down Down Down Down Down Down Down Down
write "=SUM(G2:G7)"; key Return
save''',
        # both columns right, the total typed in as the number it should compute
        "total-typed-in": '''
key ctrl+Home Right Right Right Right Right Down
for row in 2 3 4 5 6 7; do write "=D$row-C$row"; key Return; done
key ctrl+Home Right Right Right Right Right Right Down
for row in 2 3 4 5 6 7; do write "=F$row*E$row"; key Return; done
key Down
write "-45.7"; key Return
save''',
    },
}


def _script(seed: str, body: str) -> str:
    return HEAD % DOCUMENTS[seed] + body + "\n"


def test_three_wrong_attempts_per_seed():
    assert sorted(WRONG) == sorted(p.name for p in find_tasks([SEEDS]))
    assert all(len(attempts) >= 3 for attempts in WRONG.values())
    assert all(load_task(SEEDS / seed).spec.metadata["document"] == doc for seed, doc in DOCUMENTS.items())


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("seed", sorted(WRONG))
def test_wrong_attempts_earn_under_half(sandbox, cfg, seed, tmp_path):
    """Each attempt is the seed's solve.sh, run as the agent's user in a fresh container of the
    seed's image; the verifier scores the saved document as it scores any agent's."""
    started = time.monotonic()
    runner = TrialRunner(cfg.sandbox, sandbox)
    build = sandbox.build(load_task(SEEDS / seed))
    assert build.image, build.reason
    rewards, seconds = {}, {}
    for name, body in WRONG[seed].items():
        path = tmp_path / name
        shutil.copytree(SEEDS / seed, path)
        (path / "solution" / "solve.sh").write_text(_script(seed, body))
        began = time.monotonic()
        result = runner.run(load_task(path), OracleAgent(), build.image)
        seconds[name] = round(time.monotonic() - began)
        assert result.agent_exit_code == 0 and "SAVED" in result.agent_output, (name, result.agent_output[-2000:])
        rewards[name] = result.reward
    print(seed, rewards, seconds, f"{time.monotonic() - started:.0f} s")
    assert all(reward is not None and reward < 0.5 for reward in rewards.values()), rewards


@pytest.mark.docker
@pytest.mark.slow
def test_the_near_miss_probe_admits_the_seed_and_rejects_tests_that_pay_for_an_edit_left_out(sandbox, cfg, tmp_path):
    """``desktop.near_miss_rewarded``: the reference's document scored with its first edit test failing.
    The seed's rule gives that 0.4 x 2/3; the same seed scored by the old rule (the edits' plain
    share, 0.8 x 2/3 = 0.53) is rejected, naming the test the probe made fail."""
    from aes.domains.desktop.checks import checks, near_miss

    seed = SEEDS / "quarterly-sales-totals"
    runner = TrialRunner(cfg.sandbox, sandbox)
    build = sandbox.build(load_task(seed))
    assert build.image, build.reason
    missed, trial = near_miss(seed, runner, build.image)
    assert trial.reward == pytest.approx(0.4 * 2 / 3, abs=1e-3), (trial.outcome, trial.detail)  # the hook fired
    assert "aes near-miss probe" in trial.verifier_output
    variant = tmp_path / "quarterly-sales-totals"
    shutil.copytree(seed, variant)
    test_sh = variant / "tests" / "test.sh"
    rule = "SUBSTANCE, PARTIAL, BOOKKEEPING = 0.8, 0.4, 0.2"
    assert rule in test_sh.read_text()
    test_sh.write_text(test_sh.read_text().replace(rule, "SUBSTANCE, PARTIAL, BOOKKEEPING = 0.8, 0.8, 0.2"))
    [reason] = checks(variant, runner, build.image)
    assert reason.code == "desktop.near_miss_rewarded" and missed in reason.message and "0.53" in reason.message
