"""The Forget page in Chromium (docs/dashboard.md, "The Forget page"): an admin opens it from the
navigation, previews the erasure of a customer's e-mail address and sees the threads that
mention it, then erases it (confirming) and sees the report, and the address has left the
events. Shot for a look (test-artifacts/screenshots/)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests import factories as f
from tests.browser.test_dashboard import _page, browser, eager_tasks, shot  # noqa: F401 (fixtures)
from threads.models import Event

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("no_fold_triggers", "eager_tasks"),
]

EMAIL = "grace.customer@example.com"


def _mentioning() -> int:
    return sum(EMAIL in str(event.data) for event in Event.objects.all())


def test_an_admin_erases_a_value_and_the_report_appears(
    browser: Any,  # noqa: F811
    live_server: Any,
) -> None:
    workspace, _ = f.make_workspace("acme")
    f.make_person(workspace, "ada", "admin")
    for n in (1, 2):
        thread = f.make_thread(workspace, external_id=f"support-{n}")
        f.append(thread, f.user(f"Write to me at {EMAIL}"), f.assistant("Noted."))
    page = _page(browser, {"url": live_server.url}, "ada")
    page.on("dialog", lambda dialog: dialog.accept())

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Forget").click()
    page.get_by_role("heading", name="Erase a value").wait_for()
    page.get_by_label("Value to erase").fill(EMAIL)
    page.get_by_label("Reason").fill("the customer asked to be forgotten")
    page.get_by_role("button", name="Preview").click()
    page.get_by_role("heading", name="Preview: what the erasure would touch").wait_for()
    report = page.locator("#erasure-threads")
    expect(report.get_by_role("link", name="support-1")).to_have_count(1)
    expect(report.get_by_role("link", name="support-2")).to_have_count(1)
    assert _mentioning() == 2

    # The form stays filled in after a preview: Erase follows it.
    page.get_by_role("button", name="Erase").click()
    page.get_by_role("heading", name="Erased").wait_for()
    counts = page.locator("#erasure-counts").inner_text()
    assert "2 threads" in counts and "2 events" in counts
    assert page.get_by_label("Value to erase").input_value() == ""
    assert EMAIL not in page.content()
    assert _mentioning() == 0
    shot(page, "60-forget-erased")


def test_an_admin_dry_runs_retention_and_the_report_appears(
    browser: Any,  # noqa: F811
    live_server: Any,
) -> None:
    """The dry run is a task: the page shows its progress, then reloads the report in place."""
    from threads.models import Thread

    workspace, _ = f.make_workspace("acme")
    f.make_person(workspace, "ada", "admin")
    idle = f.make_thread(workspace, external_id="idle-1")
    f.append(idle, f.user("hello"))
    busy = f.make_thread(workspace, external_id="busy-1")
    f.append(busy, f.user("hello"))
    f.age(idle, 40)
    page = _page(browser, {"url": live_server.url}, "ada")
    page.goto(live_server.url + "/forget/")
    page.get_by_label("Delete threads inactive for (days; empty: off)").fill("30")
    page.get_by_role("button", name="Save policy").click()
    page.get_by_text("Retention policy saved.").wait_for()

    page.get_by_role("button", name="Dry run").click()
    page.get_by_role("heading", name="Dry run: a run now would delete").wait_for()
    listed = page.locator("#retention-threads")
    expect(listed.get_by_role("link", name="idle-1")).to_have_count(1)
    expect(listed.get_by_role("link", name="busy-1")).to_have_count(0)
    expect(page.locator("#retention-counts")).to_contain_text("1 thread")
    assert Thread.objects.filter(pk=idle.pk).exists()  # nothing deleted
    shot(page, "61-forget-retention-dry-run")
