"""The README's pictures, taken from a running demo in headless Chromium (scripts/screenshots
starts the demo and calls this): python scripts/screenshots.py URL OUT_DIR.

Each picture is the browser's viewport (1280x800) on one page of the demo, signed in as the
role that would look at it. The names are those README.md shows.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, ViewportSize, sync_playwright

VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
PASSWORDS = {
    "operator": "operator-demo-pass",
    "reviewer": "reviewer-demo-pass",
    "admin": "admin-demo-pass",
}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]


def signed_in(browser: Any, url: str, role: str) -> Page:
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
    page: Page = context.new_page()
    page.set_default_timeout(20000)
    page.goto(f"{url}/accounts/login/")
    page.get_by_label("Username").fill(role)
    page.get_by_label("Password").fill(PASSWORDS[role])
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r".*/threads/.*"))
    return page


def open_thread(page: Page, url: str, external_id: str, tab: str = "") -> None:
    page.goto(f"{url}/threads/?q={external_id}&names_only=1")
    page.locator("#thread-table").get_by_role("link", name=external_id, exact=True).first.click()
    page.wait_for_load_state()
    if tab:
        page.locator("nav.tabs").get_by_role("link", name=tab, exact=True).click()
        page.wait_for_load_state()


# The top bar stays over the page when it scrolls.
TOP_BAR = 60


def to_top(page: Page, selector: str) -> None:
    """Scroll so that the first element matching `selector` is just under the top bar."""
    page.locator(selector).first.wait_for()
    page.evaluate(
        "([s, m]) => { const e = document.querySelector(s);"
        " window.scrollTo(0, e.getBoundingClientRect().top + window.scrollY - m); }",
        [selector, TOP_BAR],
    )


def to_bottom(page: Page, selector: str) -> None:
    """Scroll so that the first element matching `selector` ends at the viewport's bottom."""
    page.locator(selector).first.wait_for()
    page.evaluate(
        "s => { const e = document.querySelector(s);"
        " window.scrollTo(0, e.getBoundingClientRect().bottom + window.scrollY"
        " - window.innerHeight + 16); }",
        selector,
    )


def shot(page: Page, out: Path, name: str) -> None:
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(out / f"{name}.png"))
    print(f"  {name}.png")


def take(url: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"),
            headless=True,
            args=CHROMIUM_ARGS,
        )
        operator = signed_in(browser, url, "operator")
        # The threads with the most problems first.
        operator.goto(f"{url}/threads/?sort=-severity")
        shot(operator, out, "01-threads")
        # A thread with open problems: the banner says what is wrong and what to do.
        open_thread(operator, url, "refund-4471")
        shot(operator, out, "04-thread-banner")
        # The time axis: when each event happened, how long each call took, the gaps.
        open_thread(operator, url, "refund-5190")
        to_top(operator, "#seq-6")
        shot(operator, out, "02-timeline")
        open_thread(operator, url, "order-10086", "Context")
        shot(operator, out, "03-context")
        # A LangGraph thread: the node it stopped at and what runs next.
        open_thread(operator, url, "langgraph-order-5521")
        shot(operator, out, "08-langgraph-position")
        operator.goto(f"{url}/operations/?hours=6")
        shot(operator, out, "07-operations")

        reviewer = signed_in(browser, url, "reviewer")
        # The approval beside the refund whose outcome is unknown: the whole card, taller.
        reviewer.set_viewport_size({"width": 1280, "height": 940})
        reviewer.goto(f"{url}/approvals/?thread=refund-4471")
        to_top(reviewer, "[id^='approval-']")
        shot(reviewer, out, "06-approval-related")
        reviewer.set_viewport_size(VIEWPORT)
        # The lying summariser's candidate, refused by verification.
        open_thread(reviewer, url, "refund-5190", "Summaries")
        reviewer.locator("table").get_by_role("row").filter(has_text="Rejected").first.get_by_role(
            "link", name=re.compile(r"^v\d+$")
        ).click()
        reviewer.wait_for_load_state()
        shot(reviewer, out, "05-summary-detail")

        admin = signed_in(browser, url, "admin")
        open_thread(admin, url, "refund-5190", "Checkpoints")
        admin.get_by_role("button", name="Roll back…").last.click()
        admin.locator("#rollback-panel *").first.wait_for()
        to_bottom(admin, "#rollback-panel")
        shot(admin, out, "12-rollback-preview")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the demo's address, e.g. http://127.0.0.1:8000")
    parser.add_argument("out", type=Path, help="where the PNGs go (docs/screenshots)")
    args = parser.parse_args()
    take(args.url.rstrip("/"), args.out)


if __name__ == "__main__":
    main()
