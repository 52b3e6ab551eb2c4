"""In a browser (docs/dashboard.md, "Problems and what to do"): an operator reads a thread's
open problems at the top of its page and follows "Resolve" to the form that settles the
unknown refund; on a phone the thread list's Problems column stays on the screen."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.browser.test_dashboard import (  # noqa: F401 (fixtures)
    _page,
    browser,
    eager_tasks,
    shot,
    site,
)
from threads.models import SideEffect, SideEffectStatus, Thread

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_operator_follows_the_banner_to_resolve_the_unknown_refund(
    browser: Any,  # noqa: F811 (a fixture)
    site: dict[str, Any],  # noqa: F811 (a fixture)
) -> None:
    page = _page(browser, site, "operator")
    thread = site["thread"]
    page.goto(f"{site['url']}/threads/{thread.pk}/")
    banner = page.locator(".problem-banner")
    expect(banner).to_be_visible()
    items = banner.locator("li.problem")
    # the unknown refund first, then the two pending approvals
    expect(items).to_have_count(3)
    assert "refund-10086" in items.nth(0).inner_text()
    assert "Approval pending" in items.nth(1).inner_text()
    shot(page, "30-problem-banner")

    # on another tab too
    page.goto(f"{site['url']}/threads/{thread.pk}/checkpoints/")
    expect(page.locator(".problem-banner li.problem")).to_have_count(3)

    effect = SideEffect.objects.get(thread=thread, tool_call_id="c2")
    page.locator(".problem-banner").get_by_role("link", name="Resolve").click()
    page.wait_for_url(re.compile(rf"/side-effects/\?.*status=unknown.*#effect-{effect.pk}$"))
    card = page.locator(f"#effect-{effect.pk}")
    card.get_by_label("succeeded").check()
    card.get_by_label(re.compile("Evidence")).fill("the bank shows refund re_123 settled")
    card.get_by_role("button", name="Resolve").click()
    card.locator("textarea").wait_for(state="detached")
    assert SideEffect.objects.get(pk=effect.pk).status == SideEffectStatus.SUCCEEDED

    page.goto(f"{site['url']}/threads/{thread.pk}/")
    left = page.locator(".problem-banner li.problem")
    expect(left).to_have_count(2)
    assert "refund-10086" not in page.locator(".problem-banner").inner_text()
    page.context.close()


def test_a_timeline_badge_leads_to_its_action(
    browser: Any,  # noqa: F811 (a fixture)
    site: dict[str, Any],  # noqa: F811 (a fixture)
) -> None:
    page = _page(browser, site, "reviewer")
    thread = site["thread"]
    page.goto(f"{site['url']}/threads/{thread.pk}/")
    page.locator("a.badge-action", has_text="side effect: unknown").click()
    effect = SideEffect.objects.get(thread=thread, tool_call_id="c2")
    page.wait_for_url(re.compile(rf"#effect-{effect.pk}$"))
    expect(page.locator(f"#effect-{effect.pk}")).to_be_visible()
    page.go_back()
    page.locator("a.badge-action", has_text="approval pending").first.click()
    page.wait_for_url(re.compile(r"/approvals/\?thread=order-10086#approval-\d+$"))
    expect(page.get_by_role("button", name=re.compile("Approve")).first).to_be_visible()
    page.context.close()


def test_the_problems_column_stays_on_a_phone(
    browser: Any,  # noqa: F811 (a fixture)
    site: dict[str, Any],  # noqa: F811 (a fixture)
) -> None:
    # A titled thread with three problems, one of them a pin with a long reason: the cell the
    # demo cut off.
    Thread.objects.filter(pk=site["thread"].pk).update(
        pinned_at=timezone.now(),
        pinned_by="admin",
        pin_reason="summary v2 lost the refund state; checking the bank before folding again",
    )
    page = _page(browser, site, "operator", width=390)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{site['url']}/threads/?sort=-severity")
    width = page.evaluate("window.innerWidth")
    cells = page.locator("#thread-table td.col-problems")
    assert cells.count() >= 3
    outside = []
    for n in range(cells.count()):
        box = cells.nth(n).bounding_box()
        assert box is not None
        if box["x"] < 0 or box["x"] + box["width"] > width + 0.5:
            outside.append((n, box))
    assert not outside
    # the most severe first: the broken chain, then the unknown refund
    assert "chain broken" in cells.nth(0).inner_text()
    assert "unknown side effect" in cells.nth(1).inner_text()
    header = page.get_by_role("columnheader", name=re.compile("Problems"))
    box = header.bounding_box()
    assert box is not None and box["x"] + box["width"] <= width + 0.5
    shot(page, "31-phone-thread-list")

    thread = site["thread"]
    page.goto(f"{site['url']}/threads/{thread.pk}/")
    banner = page.locator(".problem-banner").bounding_box()
    assert banner is not None and banner["x"] >= 0 and banner["x"] + banner["width"] <= width
    page.context.close()
