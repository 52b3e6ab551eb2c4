"""The Content Security Policy in Chromium (docs/dashboard.md, "Dashboard"): every page loads with
no policy violation and no console error, htmx still works (a search region, a preview slot, a
form), and hostile agent text fires no dialog and makes no request."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests import factories as f
from tests.browser.test_dashboard import CHROMIUM_ARGS, browser  # noqa: F401 (a fixture)
from tests.views.test_inert_text import pages, seed_hostile

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Registered before any page script: every violation the policy reports, on every document.
COLLECT_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(e.violatedDirective + " " + (e.blockedURI || "inline"));
});
"""


@pytest.fixture
def hostile_site(live_server: Any) -> dict[str, Any]:
    workspace, _ = f.make_workspace("acme")
    admin = f.make_person(workspace, "ada", "admin")
    thread = seed_hostile(workspace, admin)
    return {"url": live_server.url, "thread": thread}


def test_pages_load_under_the_policy_and_agent_text_stays_text(
    browser: Any,  # noqa: F811
    hostile_site: dict[str, Any],
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.add_init_script(COLLECT_VIOLATIONS)
    page = context.new_page()
    page.set_default_timeout(15000)
    dialogs: list[str] = []
    errors: list[str] = []
    evil: list[str] = []

    def dialog(opened: Any) -> None:
        dialogs.append(opened.message)
        opened.dismiss()

    page.on("dialog", dialog)

    def console(message: Any) -> None:
        # Chromium sometimes asks for /favicon.ico despite the page's data: icon; not ours.
        where = message.location.get("url", "")
        if message.type == "error" and not where.endswith("/favicon.ico"):
            errors.append(f"{message.text} {where}")

    page.on("console", console)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    # The payloads' htmx attributes would fetch "/evil" or "evil" (relative to the page).
    page.on(
        "request", lambda r: evil.append(r.url) if urlsplit(r.url).path.endswith("evil") else None
    )
    base = hostile_site["url"]
    page.goto(base + "/accounts/login/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill(f.PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/threads/$"))

    violations: dict[str, list[str]] = {}
    for url in [*pages(hostile_site["thread"]), "/api/docs/"]:
        page.goto(base + url)
        page.wait_for_load_state("networkidle")
        found = page.evaluate("window.__violations")
        if found:
            violations[url] = found
    assert violations == {}
    assert dialogs == [] and evil == []
    assert errors == []

    # htmx under the policy: the search swaps the table region in place ...
    page.goto(base + "/threads/")
    page.evaluate("window.__same_document = true")
    page.get_by_label("Search threads").fill("no-such-thread")
    # A function, not an expression: Playwright evals expressions, which the policy refuses.
    page.wait_for_function("() => document.querySelectorAll('#thread-table td.empty').length > 0")
    assert page.evaluate("window.__same_document === true")
    # ... a preview opens in its slot ...
    page.goto(f"{base}/threads/{hostile_site['thread'].pk}/checkpoints/")
    page.get_by_role("button", name="Roll back…").last.click()
    page.locator(".preview-box").wait_for()
    # ... and a plain form posts (a key, its secret shown once).
    page.goto(base + "/keys/")
    page.get_by_label("Name").fill("browser")
    page.get_by_role("button", name="Create key").click()
    assert page.locator("#new-secret").inner_text().startswith("ctx_")
    assert page.evaluate("window.__violations") == []
    assert dialogs == [] and evil == [] and errors == []
    context.close()
