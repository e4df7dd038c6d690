"""Reference: resolve case QZ-418 through the console's pages in a headless Chromium (Playwright).

Every step is a click, a keystroke or a form submit a person would make; a screenshot of each
step goes to /logs/agent/screenshots/ (step-01-....png, ...).
"""

import os
import re
import time
import urllib.request

from playwright.sync_api import sync_playwright

BASE = os.environ.get("APP_URL", "http://127.0.0.1:8080")
SHOTS = os.environ.get("SCREENSHOT_DIR", "/logs/agent/screenshots")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]


def wait_for_app(timeout=60.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(BASE + "/login", timeout=5).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


class Steps:
    """Numbered screenshots of the run (a folder the user can write, else one under /tmp)."""

    def __init__(self, page):
        self.page, self.n = page, 0
        self.dir = SHOTS
        try:
            os.makedirs(self.dir, exist_ok=True)
        except OSError:
            self.dir = "/tmp/screenshots"
            os.makedirs(self.dir, exist_ok=True)

    def shot(self, name):
        self.n += 1
        path = os.path.join(self.dir, f"step-{self.n:02d}-{name}.png")
        self.page.screenshot(path=path, full_page=True)
        print("screenshot", path)


def main():
    wait_for_app()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"),
                                    headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.set_default_timeout(20_000)
        steps = Steps(page)

        page.goto(BASE + "/cases")  # the console asks to sign in first
        page.fill("#username", "duty.lead")
        page.fill("#password", "lantern-42")
        steps.shot("sign-in")
        page.click("#sign-in")

        page.fill("#q", "QZ-418")
        page.click("#search")
        steps.shot("queue-search")
        page.click("a:text-is('QZ-418')")
        symptom = page.inner_text("div.card")
        assert "token expired" in symptom and "signing-key rotation" in symptom, symptom
        steps.shot("case-symptom")

        # the runbook is the one whose symptoms match the case's, not the one numbered like it
        page.click("header a:text-is('Runbooks')")
        page.click("a:text-is('RB-207')")
        runbook = page.inner_text("div.card")
        note = re.search(r"Resolution note to record:\s*(.+)", runbook).group(1).strip()
        escalation = re.search(r"Escalation review:\s*(.+)", runbook).group(1).strip()
        steps.shot("runbook")

        page.click("header a:text-is('Case queue')")
        page.fill("#q", "QZ-418")
        page.press("#q", "Enter")
        page.click("a:text-is('QZ-418')")
        page.select_option("#runbook", label="RB-207 - Stale signing key in the token cache")
        page.select_option("#assignee", label="Mira Chen (Platform)")
        page.fill("#resolution_note", note)
        page.select_option("#escalation", label=escalation)
        steps.shot("draft-filled")
        page.click("#save-draft")
        page.wait_for_selector("text=Draft of QZ-418 saved.")
        steps.shot("draft-saved")

        page.click("#resolve")
        page.wait_for_selector("text=Case QZ-418 resolved.")
        assert page.inner_text("#case-status") == "resolved"
        steps.shot("resolved")
        browser.close()


if __name__ == "__main__":
    main()
