"""In a browser (docs/repairs.md, "Rollback"): an admin rolls back with the pin ticked, sees the pin
on the thread with folds paused, changes the thread's settings and releases the pin, each form
answered in place by htmx."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.test_dashboard import (  # noqa: F401 (fixtures)
    _page,
    browser,
    eager_tasks,
    site,
)
from threads.models import AuditEntry, Thread

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_admin_pins_a_rollback_changes_settings_and_releases_it(
    browser: Any,  # noqa: F811 (a fixture)
    site: dict[str, Any],  # noqa: F811 (a fixture)
) -> None:
    page = _page(browser, site, "admin")
    thread = site["thread"]
    page.goto(f"{site['url']}/threads/{thread.pk}/checkpoints/")
    page.get_by_role("button", name="Roll back…").last.click()
    preview = page.locator(".preview-box")
    preview.wait_for()
    preview.get_by_label(re.compile("Reason")).fill("summary v2 lost the refund state")
    preview.get_by_label(re.compile("Pin the thread")).check()
    preview.get_by_role("button", name=re.compile("Roll back to checkpoint")).click()
    page.wait_for_url(re.compile(r"/summaries/\d+/$"))
    pin = page.locator(".thread-pin")
    expect(pin).to_contain_text("summary v2 lost the refund state")

    page.goto(f"{site['url']}/threads/{thread.pk}/summaries/")
    expect(page.get_by_text("Folds are paused")).to_be_visible()
    expect(page.get_by_role("button", name="Fold now")).to_have_count(0)

    page.get_by_text("Summariser and fold settings").click()
    page.get_by_label("Context window").fill("2400")
    page.get_by_role("button", name="Save settings").click()
    # A selector wait, not wait_for_function: polling a string predicate evals it, which the
    # page's CSP refuses whenever the first check finds the swap not done yet.
    page.locator("details.thread-settings:not([open]) #ts-context_window").wait_for(
        state="attached"
    )
    stored = Thread.objects.get(pk=thread.pk)
    assert stored.context_window == 2400 and stored.pinned_at is not None

    page.locator("#unpin-reason").fill("checked the refund by hand")
    page.get_by_role("button", name="Release the pin").click()
    pin.wait_for(state="detached")
    assert Thread.objects.get(pk=thread.pk).pinned_at is None
    assert AuditEntry.objects.filter(action="thread.unpin").count() == 1
    page.reload()
    expect(page.get_by_role("button", name="Fold now")).to_be_visible()
    page.context.close()
