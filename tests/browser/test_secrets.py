"""Secrets at ingest in Chromium (docs/dashboard.md, "Dashboard"): the thread list's filter finds
the thread whose event holds a key and badges it; its timeline badges the event with the flag's
type and field, and shows nothing of the key but the event's own body. Shot for a look
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


def test_the_list_filters_and_the_timeline_badges_a_leaked_key(
    browser: Any,  # noqa: F811
    live_server: Any,
) -> None:
    workspace, _ = f.make_workspace("acme")
    f.make_person(workspace, "operator", "operator")
    leaked = f.make_thread(workspace, external_id="deploy-staging")
    f.append(
        leaked,
        f.user("Deploy the service with the staging config"),
        f.call("c1", "read_config", {"path": "deploy/staging.env"}),
        f.result("c1", value={"access_key_id": "AKIAIOSFODNN7EXAMPLE", "region": "eu-west-1"}),
        f.assistant("Deploying now."),
    )
    clean = f.make_thread(workspace, external_id="refund-10086")
    f.append(clean, f.user("Refund order 10086"))
    page = _page(browser, {"url": live_server.url}, "operator")

    page.get_by_label("Secrets in events").check()
    page.wait_for_url(lambda url: "secrets=1" in url)
    rows = page.locator("#thread-table tbody tr")
    rows.first.wait_for()
    expect(rows).to_have_count(1)
    assert "deploy-staging" in rows.first.inner_text()
    badge = rows.first.locator(".secrets-badge")
    assert badge.inner_text() == "1 event with secrets"
    shot(page, "40-threads-with-secrets")

    badge.click()
    page.wait_for_url(lambda url: f"/threads/{leaked.pk}/" in url)
    flags = page.locator(".secret-flag")
    expect(flags).to_have_count(1)
    assert flags.first.inner_text() == "secret: AWS Access Key in result.access_key_id"
    expect(page.locator("#seq-3 .secret-flag")).to_have_count(1)
    shot(page, "41-timeline-secret-flag")
