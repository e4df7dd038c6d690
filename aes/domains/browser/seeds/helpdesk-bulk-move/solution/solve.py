"""Reference: move Lumen Dental's open invoice tickets to Billing through the helpdesk's pages in a headless Chromium.

Every step is a click, a keystroke or a form submit a person would make; a screenshot of each
step goes to /logs/agent/screenshots/ (step-01-....png, ...).
"""

import os
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

        page.goto(BASE + "/tickets")  # the helpdesk asks to sign in first
        page.fill("#username", "triage.lead")
        page.fill("#password", "harbor-63")
        steps.shot("sign-in")
        page.click("#sign-in")

        # narrow the list to the customer (exactly "Lumen Dental", not "Lumen Denta Labs")
        page.fill("#q", "Lumen Dental")
        page.click("#search")
        steps.shot("filtered")
        picked = []
        for row in page.locator("#bulk tr").all()[1:]:
            cells = row.locator("td").all_inner_texts()
            _, tid, customer, subject, status = (c.strip() for c in cells[:5])
            if customer == "Lumen Dental" and status == "open" and "invoice" in subject.lower():
                row.locator("input[type=checkbox]").check()
                picked.append(tid)
        assert picked == ["T-1001", "T-1007", "T-1012", "T-1014"], picked
        page.select_option("#queue", label="Billing")
        page.fill("#note", "TR-88: Lumen Dental invoice tickets to Billing")
        steps.shot("selected")
        page.click("#review-move")

        assert page.locator("#selected li").count() == len(picked)
        steps.shot("confirm")
        page.click("#confirm-move")
        page.wait_for_selector("text=Moved 4 tickets to Billing.")
        steps.shot("moved")

        page.click("header a:text-is('Tickets')")  # the list has two pages: look the ticket up
        page.fill("#q", "T-1014")
        page.click("#search")
        page.click("a:text-is('T-1014')")
        assert page.inner_text("#ticket-queue") == "Billing"
        steps.shot("ticket-after")
        browser.close()


if __name__ == "__main__":
    main()
