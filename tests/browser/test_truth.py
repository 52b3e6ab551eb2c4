"""Pictures and numbers that tell the truth, in Chromium (docs/dashboard.md, "Dashboard"): after
"Fold now" the thread's header names the new head without a reload."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.test_dashboard import _page, browser, eager_tasks, site  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_header_follows_a_fold_started_on_the_summaries_tab(
    browser: Any,  # noqa: F811
    site: dict[str, Any],  # noqa: F811
) -> None:
    page = _page(browser, site, "operator")
    thread = site["thread"]
    thread.refresh_from_db()
    old_head, last = thread.head_version, thread.last_seq
    assert thread.covered_until < last  # the fold has events to cover
    page.goto(f"{site['url']}/threads/{thread.pk}/summaries/")
    header = page.locator("#thread-meta")
    assert f"head v{old_head} covers 1–{thread.covered_until}" in header.inner_text()
    page.evaluate("window.__same_document = true")
    page.get_by_role("button", name="Fold now").click()
    page.locator("#fold-progress .badge").filter(has_text=re.compile("success")).wait_for()
    header.get_by_text(f"head v{old_head + 1} covers 1–{last}").wait_for()
    assert page.evaluate("window.__same_document === true")  # no reload did it
    expect(page.locator("#thread-meta")).to_have_count(1)
    # The new row says what it folded and what it covers, as the header does.
    row = page.locator("#summary-versions tbody tr").filter(has_text=f"v{old_head + 1}")
    cells = row.locator("td.mono").all_inner_texts()
    assert cells[1] == f"1–{last}" and cells[0].endswith(f"–{last}")
    page.context.close()


def test_operations_charts_say_no_data_yet_then_draw_in_the_badges_colours(
    browser: Any,  # noqa: F811
    site: dict[str, Any],  # noqa: F811
) -> None:
    """On a fresh site the context request charts have nothing to draw and say so; the
    backlog chart draws the unknown side effect in the amber of its badge."""
    page = _page(browser, site, "operator")
    page.goto(f"{site['url']}/operations/")
    for chart in ("overflow-chart", "p95-chart"):  # no agent has read a context yet
        note = page.locator(f"#{chart}-empty")
        assert note.is_visible() and "No data yet" in note.inner_text(), chart
    page.goto(f"{site['url']}/side-effects/")
    badge = page.locator("article.card .badge", has_text="unknown").first
    amber = badge.evaluate("el => getComputedStyle(el).color")
    page.goto(f"{site['url']}/operations/")
    line = page.locator("#backlog-chart-title + desc ~ g", has_text="unknown side effects")
    dot = line.locator("circle").first
    assert dot.evaluate("el => getComputedStyle(el).fill") == amber
