"""Redaction in Chromium (docs/dashboard.md, "Dashboard"): an admin redacts an event from its card
(a reason, a confirmation) and a leaked key from its secret badge in one click; each card then
shows who, when and why, and the page holds nothing of the content. Shot for a look
(test-artifacts/screenshots/)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests import factories as f
from tests.browser.test_dashboard import _page, browser, shot  # noqa: F401 (a fixture)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("no_fold_triggers"),
]

SECRET = "AKIAIOSFODNN7EXAMPLE"


def test_an_admin_redacts_from_the_card_and_from_the_secret_badge(
    browser: Any,  # noqa: F811
    live_server: Any,
) -> None:
    workspace, _ = f.make_workspace("acme")
    f.make_person(workspace, "ada", "admin")
    thread = f.make_thread(workspace, external_id="deploy-staging")
    f.append(
        thread,
        f.user("My card is 4111 1111 1111 1111, deploy please"),
        f.call("c1", "read_config", {"path": "deploy/staging.env"}),
        f.result("c1", value={"access_key_id": SECRET, "region": "eu-west-1"}),
        f.assistant("Deploying now."),
    )
    page = _page(browser, {"url": live_server.url}, "ada")
    page.goto(f"{live_server.url}/threads/{thread.pk}/")

    card = page.locator("#seq-1")
    card.locator(".redact-form summary").click()
    card.get_by_label("Reason").fill("a customer's card number")
    card.get_by_label("The content leaves the database for good").check()
    card.get_by_role("button", name="Redact #1").click()
    page.locator("#seq-1 .redacted-note").wait_for()
    assert "4111" not in page.content()
    assert "Content redacted by ada" in page.locator("#seq-1 .redacted-note").inner_text()

    page.locator("#seq-3 .secret-flag").click()
    page.locator("#seq-3 .redacted-note").wait_for()
    assert SECRET not in page.content()
    note = page.locator("#seq-3 .redacted-note").inner_text()
    assert "secret found at ingest: AWS Access Key in result.access_key_id" in note
    expect(page.locator(".secret-flag")).to_have_count(0)
    shot(page, "42-timeline-redacted")
