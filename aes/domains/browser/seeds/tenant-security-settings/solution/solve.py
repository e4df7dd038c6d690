"""Reference: apply policy SEC-7 to Halvorsen Marine through the admin console's pages in a headless Chromium.

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

        page.goto(BASE + "/tenants")  # the console asks to sign in first
        page.fill("#username", "admin.ops")
        page.fill("#password", "sextant-77")
        steps.shot("sign-in")
        page.click("#sign-in")

        # the active baseline is SEC-7 (SEC-5 is superseded)
        page.click("header a:text-is('Policies')")
        page.click("a:text-is('SEC-7')")
        policy = page.inner_text("div.card")
        assert "exactly 365 days" in policy and "at most 30 minutes" in policy, policy
        steps.shot("policy-sec-7")

        # the verified domains are on the tenant's profile page
        page.click("header a:text-is('Tenants')")
        page.click("a:text-is('Halvorsen Marine')")
        verified = [li.strip() for li in page.locator("#verified li").all_inner_texts()]
        steps.shot("tenant-profile")

        page.click("a:text-is('Security settings')")
        steps.shot("settings-before")
        timeout = int(page.input_value("#session_timeout_minutes"))
        minimum = int(page.input_value("#password_min_length"))
        page.fill("#session_timeout_minutes", str(min(timeout, 30)))
        page.fill("#password_min_length", str(max(minimum, 14)))
        page.check("#mfa_required")
        page.select_option("#retention_days", label="365 days")
        page.fill("#allowed_domains", "\n".join(verified))
        page.fill("#change_ref", "CHG-2231")
        steps.shot("settings-filled")
        page.click("#save-settings")
        page.wait_for_selector("text=Settings of Halvorsen Marine saved")
        steps.shot("settings-saved")

        page.click("header a:text-is('Audit log')")
        assert "CHG-2231" in page.inner_text("main")
        steps.shot("audit-log")
        browser.close()


if __name__ == "__main__":
    main()
