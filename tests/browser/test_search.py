"""Message search in Chromium (docs/search.md, "Message search"): a person types words into the
thread list's search box, sees the matching events with the words highlighted and the agent's markup
inert, and follows a hit to its event on the timeline."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests import factories as f
from tests.browser.test_dashboard import _page, browser, shot  # noqa: F401 (a fixture)
from tests.views.conftest import HOSTILE

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("no_fold_triggers"),
]


def test_search_box_highlights_a_hit_and_opens_it_on_the_timeline(
    browser: Any,  # noqa: F811
    live_server: Any,
) -> None:
    workspace, _ = f.make_workspace("acme")
    f.make_person(workspace, "operator", "operator")
    thread = f.make_thread(workspace, external_id="parcel-7", title="Lost parcel")
    f.append(thread, *[f.user(f"status check {n}") for n in range(120)])
    f.append(thread, *[f.assistant(f"still looking {n}") for n in range(130)])
    f.append(
        thread,
        f.user("Where is my parcel? " + HOSTILE),
        f.call("c1", "track_parcel", {"carrier": "Northwind"}),
        f.result("c1", value={"where": "Rotterdam depot, shelf 4"}),
    )
    other, _ = f.make_workspace("globex")
    f.append(f.make_thread(other, external_id="not-yours"), f.user("Rotterdam as well"))

    page = _page(browser, {"url": live_server.url}, "operator")
    dialogs: list[str] = []

    def refuse(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", refuse)
    assert not page.get_by_label("names and titles only").is_checked()  # events by default
    page.locator("#q").fill("rotterdam")
    hits = page.locator("#search-hits tr.search-hit")
    hits.first.wait_for()
    expect(hits).to_have_count(1)  # the other workspace's event is not shown
    hit = hits.first
    assert hit.locator("mark").all_inner_texts() == ["Rotterdam"]
    assert "tool_result" in hit.inner_text() and "parcel-7" in hit.inner_text()
    assert "#253" in hit.inner_text()
    # The agent's markup, found by another word, is shown as text and never runs.
    page.locator("#q").fill("parcel where")
    page.locator("#search-hits tr.search-hit", has_text="#251").wait_for()
    cell = page.locator("#search-hits tr.search-hit", has_text="#251").locator("td.snippet")
    assert "<script>alert(1)</script>" in cell.inner_text()
    expect(cell.locator("script, div")).to_have_count(0)
    assert sorted(t.lower() for t in cell.locator("mark").all_inner_texts()) == ["parcel", "where"]
    shot(page, "16-message-search")

    page.locator("#q").fill("rotterdam")
    page.locator("#search-hits a.hit-link", has_text="#253").wait_for()
    page.locator("#search-hits a.hit-link", has_text="#253").click()
    page.wait_for_url(re.compile(rf"/threads/{thread.pk}/\?from=201#seq-253$"))
    event = page.locator("#seq-253")
    assert event.is_visible() and "Rotterdam depot" in event.inner_text()
    box = event.bounding_box()
    assert box is not None and 0 <= box["y"] < 860  # scrolled to the event
    assert dialogs == []
