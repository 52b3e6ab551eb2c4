"""The Operations page in Chromium: every chart is drawn with its lines, and the page is shot
for a look (test-artifacts/screenshots/)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests import factories as f
from tests.browser.test_dashboard import _page, browser, shot  # noqa: F401 (a fixture)
from tests.metrics.test_operations_page import NOW, seed
from threads.views import operations

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("no_fold_triggers"),
]


def test_operations_page_draws_its_charts(
    browser: Any,  # noqa: F811
    live_server: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(operations, "_now", lambda: NOW)
    workspace, _ = f.make_workspace("acme")
    f.make_person(workspace, "operator", "operator")
    thread = f.make_thread(workspace, external_id="ops-order")
    seed(workspace, thread, f.make_person(workspace, "olga", "operator"))
    page = _page(browser, {"url": live_server.url}, "operator")
    page.goto(f"{live_server.url}/operations/")
    expect(page.locator("svg.ops-chart")).to_have_count(7)
    # Counts per hour are bars (folds, failed checks, events with secrets), rates and levels
    # lines.
    assert page.locator("svg.ops-bar").count() == 3 and page.locator("svg.ops-line").count() == 4
    assert page.locator("svg.ops-bar rect").count() >= 4
    assert page.locator("svg.ops-line polyline").count() >= 4
    assert page.locator("svg.ops-chart").first.bounding_box()["width"] > 300
    shot(page, "15-operations")
