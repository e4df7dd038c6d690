"""Only the substance reaches 0.5 in the browser domain (issue 25): three wrong-but-plausible attempts
per seed, each made through the app's pages in the seed's own image (a form saved with only the
change reference typed, the right edit on the wrong record, one of several changes, the right
records with the wrong outcome), earn under 0.5 while the app really saved them; and the partial-form
probe (``browser.partial_rewarded``) rejects a seed whose test.sh pays by the fraction of passing
tests (bookkeeping ungated) while it admits the seeds as they are."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from aes.sandbox import OracleAgent, TrialRunner
from aes.tasks import load_task

SEEDS = Path(__file__).resolve().parents[1] / "aes" / "domains" / "browser" / "seeds"

HEAD = '''import os, re, time, urllib.request
from playwright.sync_api import sync_playwright
BASE = "http://127.0.0.1:8080"
for _ in range(120):
    try:
        urllib.request.urlopen(BASE + "/login", timeout=5).read()
        break
    except OSError:
        time.sleep(0.5)
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
    page = browser.new_page()
    page.set_default_timeout(20_000)
    page.goto(BASE + "{start}")
    page.fill("#username", "{user}")
    page.fill("#password", "{password}")
    page.click("#sign-in")
'''
SIGN_IN = {"tenant-security-settings": ("/tenants", "admin.ops", "sextant-77"),
           "case-runbook-resolution": ("/cases", "duty.lead", "lantern-42"),
           "order-refund-confirmation": ("/inbox", "desk.agent", "juniper-19"),
           "helpdesk-bulk-move": ("/tickets", "triage.lead", "harbor-63")}
# Each attempt ends by waiting for the app's own word that it saved the work and prints SAVED: the
# case happened (the app's state changed), not a script that stopped early.
WRONG = {
    "tenant-security-settings": {
        # the case: the change reference typed, every setting left as it was
        "reference-only": '''
    page.goto(BASE + "/tenants/halvorsen-marine/settings")
    page.fill("#change_ref", "CHG-2231")
    page.click("#save-settings")
    page.wait_for_selector("text=Settings of Halvorsen Marine saved")''',
        # the superseded baseline SEC-5 read: 60 minutes kept as 45, MFA left optional, 180 days
        "superseded-policy": '''
    page.goto(BASE + "/tenants/halvorsen-marine/settings")
    page.select_option("#retention_days", label="180 days")
    page.fill("#change_ref", "CHG-2231")
    page.click("#save-settings")
    page.wait_for_selector("text=Settings of Halvorsen Marine saved")''',
        # the right edit on the wrong record: SEC-7 applied to Halvorsen Mining
        "wrong-tenant": '''
    page.goto(BASE + "/tenants/halvorsen-mining/settings")
    page.fill("#session_timeout_minutes", "30")
    page.fill("#password_min_length", "14")
    page.check("#mfa_required")
    page.select_option("#retention_days", label="365 days")
    page.fill("#change_ref", "CHG-2231")
    page.click("#save-settings")
    page.wait_for_selector("text=Settings of Halvorsen Mining saved")''',
    },
    "case-runbook-resolution": {
        # one of four fields of the draft: the runbook picked, nothing else, never resolved
        "runbook-only-draft": '''
    page.goto(BASE + "/cases/QZ-418")
    page.select_option("#runbook", label="RB-207 - Stale signing key in the token cache")
    page.click("#save-draft")
    page.wait_for_selector("text=Draft of QZ-418 saved.")''',
        # the runbook numbered like the case (RB-418) with its note, and Mira Cheng: resolved all the same
        "by-number": '''
    page.goto(BASE + "/cases/QZ-418")
    page.select_option("#runbook", label="RB-418 - Disk pressure on ingest nodes")
    page.select_option("#assignee", label="Mira Cheng (Billing)")
    page.fill("#resolution_note", "Ingest volume expanded per RB-418.")
    page.select_option("#escalation", label="Escalate to Tier 2")
    page.click("#save-draft")
    page.wait_for_selector("text=Draft of QZ-418 saved.")
    page.click("#resolve")
    page.wait_for_selector("text=Case QZ-418 resolved.")''',
        # the right resolution on the duplicate case QZ-426
        "duplicate-case": '''
    page.goto(BASE + "/cases/QZ-426")
    page.select_option("#runbook", label="RB-207 - Stale signing key in the token cache")
    page.select_option("#assignee", label="Mira Chen (Platform)")
    page.fill("#resolution_note", "Flushed the tenant token cache per RB-207; batch jobs re-authenticated "
              "after the key rotation.")
    page.select_option("#escalation", label="Reviewed: no escalation needed")
    page.click("#save-draft")
    page.wait_for_selector("text=Draft of QZ-426 saved.")
    page.click("#resolve")
    page.wait_for_selector("text=Case QZ-426 resolved.")''',
    },
    "order-refund-confirmation": {
        # the right lantern refund on her earlier order NW-5513
        "earlier-order": '''
    page.goto(BASE + "/orders/NW-5513")
    page.click("#start-refund")
    page.locator("#refund-items tr", has_text="Trail lantern").locator("input[type=number]").fill("1")
    page.select_option("#reason", label="Damaged in transit")
    page.click("#continue")
    page.check("#method-original_payment")
    page.click("#to-confirmation")
    page.fill("#confirm_order", "NW-5513")
    page.click("#issue")
    page.wait_for_selector("text=issued.")''',
        # every lantern, to store credit: issued, but not what she asked for
        "all-three-store-credit": '''
    page.goto(BASE + "/orders/NW-5531")
    page.click("#start-refund")
    page.locator("#refund-items tr", has_text="Trail lantern").locator("input[type=number]").fill("3")
    page.select_option("#reason", label="Damaged in transit")
    page.click("#continue")
    page.check("#method-store_credit")
    page.click("#to-confirmation")
    page.fill("#confirm_order", "NW-5531")
    page.click("#issue")
    page.wait_for_selector("text=issued.")''',
        # the right items and reason, left at the method step: a draft, never issued
        "left-at-draft": '''
    page.goto(BASE + "/orders/NW-5531")
    page.click("#start-refund")
    page.locator("#refund-items tr", has_text="Trail lantern").locator("input[type=number]").fill("2")
    page.select_option("#reason", label="Damaged in transit")
    page.click("#continue")
    page.wait_for_selector("#to-confirmation")''',
    },
    "helpdesk-bulk-move": {
        # one of the four tickets moved
        "one-ticket": '''
    page.fill("#q", "Lumen Dental")
    page.click("#search")
    page.check("#pick-T-1001")
    page.select_option("#queue", label="Billing")
    page.fill("#note", "TR-88: Lumen Dental invoice tickets to Billing")
    page.click("#review-move")
    page.click("#confirm-move")
    page.wait_for_selector("text=Moved 1 tickets to Billing.")''',
        # every "Lumen Dent" invoice ticket: Lumen Denta Labs' and the closed one too
        "loose-search": '''
    page.fill("#q", "Lumen Dent")
    page.click("#search")
    n = 0
    for row in page.locator("#bulk tr").all()[1:]:
        cells = row.locator("td").all_inner_texts()
        if "invoice" in cells[3].lower():
            row.locator("input[type=checkbox]").check()
            n += 1
    page.select_option("#queue", label="Billing")
    page.fill("#note", "TR-88: Lumen Dental invoice tickets to Billing")
    page.click("#review-move")
    page.click("#confirm-move")
    page.wait_for_selector(f"text=Moved {n} tickets to Billing.")''',
        # the right four tickets, to the wrong queue
        "wrong-queue": '''
    page.fill("#q", "Lumen Dental")
    page.click("#search")
    for tid in ("T-1001", "T-1007", "T-1012", "T-1014"):
        page.check(f"#pick-{tid}")
    page.select_option("#queue", label="Accounts")
    page.fill("#note", "TR-88: Lumen Dental invoice tickets")
    page.click("#review-move")
    page.click("#confirm-move")
    page.wait_for_selector("text=Moved 4 tickets to Accounts.")''',
    },
}
TAIL = '''
    print("SAVED", page.url)
    browser.close()
'''


def _script(seed: str, body: str) -> str:
    start, user, password = SIGN_IN[seed]
    return HEAD.replace("{start}", start).replace("{user}", user).replace("{password}", password) + body + TAIL


def test_three_wrong_attempts_per_seed():
    assert sorted(WRONG) == sorted(p.name for p in SEEDS.iterdir() if (p / "task.toml").is_file())
    assert all(len(attempts) >= 3 for attempts in WRONG.values())
    for seed, attempts in WRONG.items():
        for name, body in attempts.items():
            compile(_script(seed, body), f"{seed}/{name}", "exec")


@pytest.mark.docker
@pytest.mark.parametrize("seed", sorted(WRONG))
def test_wrong_attempts_earn_under_half_as_the_agents_work(sandbox, cfg, seed, tmp_path):
    """Each attempt is the seed's solve.py, run as the agent's user through the app's pages; the
    verifier scores the app's saved state as it scores any agent's."""
    started = time.monotonic()
    runner = TrialRunner(cfg.sandbox, sandbox)
    build = sandbox.build(load_task(SEEDS / seed))
    assert build.image, build.reason
    rewards = {}
    for name, body in WRONG[seed].items():
        path = tmp_path / name
        shutil.copytree(SEEDS / seed, path)
        (path / "solution" / "solve.py").write_text(_script(seed, body))
        result = runner.run(load_task(path), OracleAgent(), build.image)
        assert result.agent_exit_code == 0 and "SAVED" in result.agent_output, (name, result.agent_output[-2000:])
        rewards[name] = result.reward
    print(seed, rewards, f"{time.monotonic() - started:.0f} s")
    assert all(reward is not None and reward < 0.5 for reward in rewards.values()), rewards


UNGATED = '''#!/bin/bash
cd /tests
python3 -m pytest -q -p no:cacheprovider --junitxml=/logs/verifier/junit.xml test_outputs.py
python3 - <<'PY'
import xml.etree.ElementTree as ET
suite = ET.parse("/logs/verifier/junit.xml").getroot()
suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
total = int(suite.get("tests"))
failed = sum(int(suite.get(k, 0)) for k in ("failures", "errors", "skipped"))
open("/logs/verifier/reward.txt", "w").write(f"{(total - failed) / total:.4f}\\n")
PY
'''


@pytest.mark.docker
def test_the_partial_form_probe_rejects_ungated_bookkeeping_and_admits_the_seeds(sandbox, cfg, tmp_path):
    """tenant-security-settings with a test.sh that pays the fraction of passing tests: the
    reference with its settings form saved with only the change reference typed (what the app
    accepts of it) earns 0.5 there (the kept minimum, the untouched allowlist, the cited change and
    the other tenants pay as much as the settings): browser.partial_rewarded. The seed as it is: no
    reason (``aes validate`` of every seed runs the probe too)."""
    from aes.domains.browser.probes import PartialForm, partial_reasons

    started = time.monotonic()
    runner = TrialRunner(cfg.sandbox, sandbox)
    ungated = tmp_path / "ungated"
    shutil.copytree(SEEDS / "tenant-security-settings", ungated)
    (ungated / "tests" / "test.sh").write_text(UNGATED)
    found = {}
    for name, path in (("ungated", ungated), ("tenant", SEEDS / "tenant-security-settings")):
        task = load_task(path)
        build = sandbox.build(task)
        assert build.image, build.reason
        trial = runner.run(task, PartialForm(), build.image)
        info = trial.agent_info
        assert info.get("wrapped") and info.get("partial"), (name, {k: info.get(k) for k in
                                                                   ("wrapped", "wrap_output", "posts", "partial")})
        found[name] = (trial.reward, [r.code for r in partial_reasons(trial)], info["partial"][0]["kept"])
    print(found, f"{time.monotonic() - started:.0f} s")
    assert found["ungated"][0] >= 0.5 and found["ungated"][1] == ["browser.partial_rewarded"], found
    assert found["ungated"][2] == ["change_ref='CHG-2231'"], found
    assert found["tenant"][1] == [], found
