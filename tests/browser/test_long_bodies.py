"""A long body in Chromium: the timeline shows its first kilobytes and its size; "Show all"
loads the rest in place (htmx, under the Content Security Policy), and the agent's markup in
it stays text."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests import factories as f
from tests.browser.test_dashboard import _page, browser, shot  # noqa: F401 (a fixture)
from threads.views.present import BODY_SHOWN_CHARS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("no_fold_triggers"),
]

HOSTILE = "<img src=x onerror=\"document.title='owned'\">"


def test_show_all_loads_the_rest_of_a_long_body(
    browser: Any,  # noqa: F811
    live_server: Any,
) -> None:
    workspace, _ = f.make_workspace("acme")
    f.make_person(workspace, "operator", "operator")
    thread = f.make_thread(workspace, external_id="long-body")
    words = " ".join(f"word{i}" for i in range(60_000))
    f.append(
        thread,
        f.user("fetch the log"),
        f.call("c1", "read_log", {"path": "/var/log/app.log"}),
        f.result("c1", value=f"FIRST-LINE {words} {HOSTILE} LAST-LINE-OF-THE-LOG"),
    )
    page = _page(browser, {"url": live_server.url}, "operator")
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.goto(f"{live_server.url}/threads/{thread.pk}/?from=1")
    card = page.locator("#seq-3")
    card.locator("summary").click()
    cut = card.locator(".body-cut")
    assert "FIRST-LINE" in cut.locator("pre").inner_text()
    assert "LAST-LINE-OF-THE-LOG" not in card.inner_text()
    assert len(cut.locator("pre").inner_text()) == BODY_SHOWN_CHARS
    assert "Showing the first 4.0\xa0KB of 575.2\xa0KB" in cut.inner_text()
    shot(page, "16-long-body-cut")
    card.get_by_role("button", name="Show all").click()
    full = card.locator(".body-full pre")
    full.wait_for()
    text = full.inner_text()
    assert text.startswith("FIRST-LINE word0 ") and text.endswith(f"{HOSTILE} LAST-LINE-OF-THE-LOG")
    expect(card.locator(".body-cut")).to_have_count(0)  # replaced, not added beside
    assert card.locator("img").count() == 0 and page.title() != "owned"
    assert problems == []
    shot(page, "17-long-body-all")
