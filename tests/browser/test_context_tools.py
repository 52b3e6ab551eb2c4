"""The context page's tool definitions and repeated content in Chromium: the tools segment
is drawn in the budget bar, and the page is shot for a look (test-artifacts/screenshots/)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests import factories as f
from tests.browser.test_dashboard import _page, browser, shot  # noqa: F401 (a fixture)
from threads.services.tools import thread_tools_set

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TOOLS = [
    {"name": "refund", "description": "Refund an order", "input_schema": {"type": "object"}},
    {
        "type": "function",
        "function": {
            "name": "search_orders",
            "description": "Search a customer's orders by any of their fields. " * 6,
            "parameters": {
                "type": "object",
                "properties": {"q": {"type": "string"}, "limit": {"type": "integer"}},
            },
        },
    },
    {"type": "function", "name": "get_order", "description": "Look an order up by its id"},
]


def test_context_page_draws_the_tools_and_the_repeats(browser: Any, live_server: Any) -> None:  # noqa: F811
    workspace, _ = f.make_workspace("acme")
    f.make_person(workspace, "operator", "operator")
    thread = f.make_thread(workspace, external_id="tools-order", context_window=4000)
    thread_tools_set(thread=thread, tools=TOOLS)
    f.append(
        thread,
        f.user("Where is order 7?"),
        f.call("a", "get_order", {"order": 7}),
        f.result("a", value={"status": "shipped", "items": ["lamp"] * 20}),
        f.assistant("It shipped."),
        f.user("Where is order 7?"),
        f.call("b", "get_order", {"order": 7}),
        f.result("b", value={"status": "shipped", "items": ["lamp"] * 20}),
        f.assistant("It shipped, as I said."),
    )
    page = _page(browser, {"url": live_server.url}, "operator")
    page.goto(f"{live_server.url}/threads/{thread.pk}/context/")
    segment = page.locator(".budget-bar .seg-tools")
    assert segment.bounding_box()["width"] > 10
    expect(page.locator("#tool-costs tbody tr")).to_have_count(3)
    assert page.locator("#tool-costs tbody tr").first.inner_text().startswith("search_orders")
    expect(page.locator("#repeat-costs tbody tr")).to_have_count(3)
    shot(page, "14-context-tools")
