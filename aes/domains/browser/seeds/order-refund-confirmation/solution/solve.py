"""Reference: issue the refund a customer asked for through the order desk's pages in a headless Chromium.

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

        page.goto(BASE + "/inbox")  # the desk asks to sign in first
        page.fill("#username", "desk.agent")
        page.fill("#password", "juniper-19")
        steps.shot("sign-in")
        page.click("#sign-in")

        page.click("a:text-is('Damaged lanterns in my November order')")
        request = page.inner_text("#message")
        assert "two of the three trail lanterns" in request and "card" in request, request
        steps.shot("customer-message")

        page.click("#message a:text-is('NW-5531')")
        steps.shot("order")
        page.click("#start-refund")
        row = page.locator("#refund-items tr", has_text="Trail lantern")
        row.locator("input[type=number]").fill("2")
        page.select_option("#reason", label="Damaged in transit")
        steps.shot("refund-items")
        page.click("#continue")

        page.check("#method-original_payment")
        assert page.inner_text("#amount") == "$69.00"
        steps.shot("refund-method")
        page.click("#to-confirmation")

        page.fill("#confirm_order", "NW-5531")
        steps.shot("refund-confirm")
        page.click("#issue")
        page.wait_for_selector("text=issued.")
        assert page.inner_text("#refund-status") == "issued"
        steps.shot("refund-issued")
        browser.close()


if __name__ == "__main__":
    main()
