"""The dashboard in a real browser, per role: log in, find a thread, open every tab, resolve a
side effect, decide approvals, roll back behind a preview, and find each action in the audit log.

Screenshots of every page go to test-artifacts/screenshots/.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests import factories as f
from tests.factories import tamper
from tests.views.conftest import HOSTILE
from threads.models import ApiKey, AuditEntry, Event, SideEffect, Thread
from threads.services import folding
from threads.services.integrity import integrity_check
from threads.services.side_effects import side_effect_resolve

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(settings.BASE_DIR) / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def eager_tasks() -> Iterator[None]:
    """Tasks run in the request's on_commit, so progress regions reach SUCCESS without a
    worker process."""
    from ctxadmin.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


def _fold(thread: Thread) -> None:
    # Triggers may already have folded on commit; a fold with nothing new is a no-op.
    folding.fold_run(thread_id=thread.pk, trigger={"kind": "manual", "reason": "setup"})


@pytest.fixture
def site(live_server: Any, eager_tasks: None) -> dict[str, Any]:
    workspace, _ = f.make_workspace("acme")
    for role in ("operator", "reviewer", "admin"):
        f.make_person(workspace, role, role)
    thread = f.make_thread(
        workspace,
        external_id="order-10086",
        title="Refund a late order",
        context_window=1200,
        reserved_output=300,
        safety_margin=50,
    )
    f.append(
        thread,
        {"kind": "message", "role": "system", "content": "You are a support agent."},
        f.user("Refund order 10086, but never more than $200."),
        f.annotation("constraint", "user", {"text": "never refund more than $200"}),
        f.assistant("Let me look the order up."),
        f.call("c1", "lookup_order", {"order": 10086}),
        f.result(
            "c1",
            value={
                "total": 180,
                "items": [{"sku": f"SKU-{i}", "qty": 1, "note": "x" * 40} for i in range(12)],
            },
            verified_facts=[{"key": "order_total", "value": 180}],
        ),
        f.assistant("The order total is $180."),
    )
    _fold(thread)
    f.append(
        thread,
        f.user("go ahead"),
        f.call("c2", "refund", {"order": 10086, "amount": 180}, side_effect_key="refund-10086"),
        f.result("c2", status="timeout"),
        f.assistant("The refund timed out; I will check."),
    )
    _fold(thread)
    f.append(
        thread,
        f.user(HOSTILE),
        {
            "kind": "approval_request",
            "action": "issue_store_credit",
            "arguments": {"order": 10086, "amount": 20},
            "tool_name": "credit",
        },
        {
            "kind": "approval_request",
            "action": "refund_shipping",
            "arguments": {"order": 10086, "amount": 12},
            "tool_name": "refund",
        },
    )
    for n in range(14):
        other = f.make_thread(workspace, external_id=f"ticket-{4200 + n}", title=f"Ticket {n}")
        f.append(other, f.user(f"question {n}"), f.assistant(f"answer {n}"))
    broken = f.make_thread(workspace, external_id="ticket-tampered", title="Rewritten history")
    f.append(broken, f.user("cancel my order"), f.assistant("cancelled"), f.user("thanks"))
    _fold(broken)
    # someone with database access rewrites what the agent said
    tamper(Event.objects.get(thread=broken, seq=2), content="refunded $900")
    integrity_check(thread=broken, full=True)
    return {"url": live_server.url, "thread": Thread.objects.get(pk=thread.pk)}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"),
            headless=True,
            args=CHROMIUM_ARGS,
        )
        yield chromium
        chromium.close()


def _page(browser: Any, site: dict[str, Any], username: str, width: int = 1280) -> Any:
    context = browser.new_context(viewport={"width": width, "height": 860})
    page = context.new_page()
    page.set_default_timeout(15000)
    page.goto(site["url"] + "/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(f.PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/threads/$"))
    return page


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_login_page_and_bad_password(browser: Any, site: dict[str, Any]) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(site["url"] + "/threads/")
    assert "/accounts/login/" in page.url
    shot(page, "00-login")
    page.get_by_label("Username").fill("operator")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_be_visible()
    page.close()


def test_operator_browses_every_tab_and_resolves_a_side_effect(
    browser: Any, site: dict[str, Any]
) -> None:
    page = _page(browser, site, "operator")
    thread = site["thread"]
    shot(page, "01-threads")
    # The table refreshes itself (every 10 s) without a reload: a new thread shows up.
    page.evaluate("window.__same_document = true")
    f.make_thread(site["thread"].workspace, external_id="arrived-later")
    page.locator("#thread-table").get_by_text("arrived-later").wait_for(timeout=15000)
    assert page.evaluate("window.__same_document === true")
    page.get_by_label("Search threads").fill("10086")
    # The threads' rows (the search's event hits, listed above them, are another table).
    page.wait_for_function(
        "() => document.querySelectorAll('#thread-table > .table-wrap tbody tr').length === 1"
    )
    assert page.locator("#search-hits tr.search-hit").count() >= 1  # words in events found
    expect(page.locator("#thread-table").get_by_text("unknown side effect")).to_be_visible()
    page.locator("#thread-table > .table-wrap").get_by_role("link", name="order-10086").click()
    page.wait_for_url(re.compile(rf"/threads/{thread.pk}/"))
    # Agent content is text, never markup: the hostile message shows as written.
    expect(page.get_by_text(HOSTILE).first).to_be_visible()
    assert page.evaluate("window.__pwned === undefined")
    shot(page, "02-timeline")
    page.get_by_role("link", name="Context").click()
    page.wait_for_url(re.compile(r"/context/$"))
    assert page.locator(".budget-bar").is_visible() and page.locator("svg").count() >= 1
    shot(page, "03-context")
    page.get_by_role("link", name="Summaries").click()
    page.wait_for_url(re.compile(r"/summaries/$"))
    shot(page, "04-summaries")
    thread.refresh_from_db()
    assert thread.covered_until < thread.last_seq  # the fold below has events to cover
    page.evaluate("window.__same_document = true")
    page.get_by_role("button", name="Fold now").click()
    page.locator("#fold-progress .badge").filter(has_text=re.compile("success")).wait_for()
    # The versions reload themselves when the fold ends: no "Refresh page" to click.
    covered = f"covers events 1–{thread.last_seq} of {thread.last_seq}"
    page.locator("#summary-versions").get_by_text(covered).wait_for()
    assert page.evaluate("window.__same_document === true")
    expect(page.get_by_role("link", name="Refresh page")).to_have_count(0)
    page.get_by_role("link", name=re.compile(r"^v2$")).click()
    page.wait_for_url(re.compile(r"/summaries/2/$"))
    page.locator(".sources button").first.click()
    page.locator(".source-slot .event").first.wait_for()
    shot(page, "05-summary-detail")
    page.get_by_label("Compare with").select_option("1")
    page.get_by_role("button", name="Diff").click()
    page.wait_for_url(re.compile(r"against=1"))
    shot(page, "06-summary-diff")
    page.get_by_role("link", name="Checkpoints").click()
    page.wait_for_url(re.compile(r"/checkpoints/$"))
    expect(page.get_by_role("button", name="Roll back…")).to_have_count(0)  # operators cannot
    shot(page, "07-checkpoints-operator")

    page.get_by_role("link", name="Side effects").first.click()
    page.wait_for_url(re.compile(r"/side-effects/"))
    shot(page, "08-side-effects")
    card = page.locator("article.card").filter(has_text="refund-10086")
    card.get_by_label("succeeded").check()
    card.get_by_label("Evidence (required)").fill("Stripe dashboard: re_123 settled")
    card.get_by_role("button", name="Resolve").click()
    page.locator("article.card .badge", has_text="succeeded").first.wait_for()
    page.get_by_role("link", name="Audit log").click()
    # A click waits for the navigation to start, not for the page: wait for what it shows.
    page.get_by_role("cell", name="side_effect.resolve").first.wait_for()
    shot(page, "09-audit")
    page.get_by_role("link", name="Integrity").click()
    page.get_by_role("button", name="Verify now").first.click()
    page.locator(".progress .badge", has_text="success").first.wait_for()
    shot(page, "10-integrity")
    page.context.close()


def test_reviewer_approves_and_rejects(browser: Any, site: dict[str, Any]) -> None:
    page = _page(browser, site, "reviewer")
    page.get_by_role("link", name="Approvals").click()
    page.get_by_text("never refund more than $200").first.wait_for()
    shot(page, "11-approvals")
    first = page.locator("article.card").filter(has_text="issue_store_credit")
    first.get_by_label("Reason (required)").fill("within the $200 limit")
    first.get_by_role("button", name="Approve").click()
    page.locator("article.card .badge", has_text="approved").wait_for()
    second = page.locator("article.card").filter(has_text="refund_shipping")
    second.get_by_label("Reason (required)").fill("shipping is not refundable")
    second.get_by_role("button", name="Reject").click()
    page.locator("article.card .badge", has_text="rejected").wait_for()
    page.get_by_role("link", name="Audit log").click()
    expect(page.get_by_role("cell", name="approval.decide")).to_have_count(2)
    page.context.close()


def test_admin_rolls_back_with_preview(browser: Any, site: dict[str, Any]) -> None:
    page = _page(browser, site, "admin")
    thread = site["thread"]
    page.goto(f"{site['url']}/threads/{thread.pk}/checkpoints/")
    page.get_by_role("button", name="Roll back…").last.click()
    preview = page.locator(".preview-box")
    preview.wait_for()
    expect(preview.get_by_text("Versions replaced")).to_be_visible()
    shot(page, "12-rollback-preview")
    preview.get_by_label(re.compile("Reason")).fill("summary v2 lost the refund state")
    preview.get_by_role("button", name=re.compile("Roll back to checkpoint")).click()
    page.wait_for_url(re.compile(r"/summaries/\d+/$"))
    expect(page.get_by_text("Restored from checkpoint")).to_be_visible()
    page.get_by_role("link", name="Audit log").click()
    page.get_by_label("Action").select_option(label="thread.rollback")
    page.get_by_role("button", name="Filter").click()
    page.locator("#entries td", has_text="admin").first.wait_for()
    shot(page, "13-audit-rollback")
    page.context.close()


def test_pages_fit_a_small_laptop_and_keep_focus_visible(
    browser: Any, site: dict[str, Any]
) -> None:
    page = _page(browser, site, "admin", width=1024)
    thread = site["thread"]
    for path in (
        "/threads/",
        f"/threads/{thread.pk}/",
        f"/threads/{thread.pk}/context/",
        f"/threads/{thread.pk}/summaries/",
        f"/threads/{thread.pk}/summaries/1/",
        f"/threads/{thread.pk}/checkpoints/",
        "/side-effects/",
        "/approvals/",
        "/integrity/",
        "/audit/",
    ):
        page.goto(site["url"] + path)
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 1, (path, overflow)
    page.goto(site["url"] + "/threads/")
    page.keyboard.press("Tab")  # the skip link first
    page.keyboard.press("Tab")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("", "none")
    page.context.close()


# No request in flight: htmx marks the element that asked with .htmx-request until the answer
# is swapped in, and never marks one whose request was cancelled.
# Functions, not expressions: Playwright evals an expression, which the page's CSP refuses.
SETTLED = "() => !document.querySelector('.htmx-request')"


def test_a_cited_source_shows_once_however_often_it_is_clicked(
    browser: Any, site: dict[str, Any]
) -> None:
    page = _page(browser, site, "operator")
    page.goto(f"{site['url']}/threads/{site['thread'].pk}/summaries/2/")
    button = page.locator(".sources button").first
    shown = page.locator(".source-slot .event")
    button.click()
    shown.first.wait_for()
    page.wait_for_function(SETTLED)
    expect(shown).to_have_count(1)
    button.click()  # a second click hides it rather than adding a copy
    page.wait_for_function(SETTLED)
    expect(shown).to_have_count(0)
    assert button.get_attribute("aria-expanded") == "false"
    button.click()
    shown.first.wait_for()
    page.wait_for_function(SETTLED)
    expect(shown).to_have_count(1)
    assert button.get_attribute("aria-expanded") == "true"
    page.context.close()


def test_the_thread_list_refresh_keeps_keyboard_focus(browser: Any, site: dict[str, Any]) -> None:
    page = _page(browser, site, "operator")
    page.clock.install()  # the 10 s refresh, run on demand
    page.goto(site["url"] + "/threads/")
    page.locator("#thread-table tbody a").first.focus()
    page.evaluate("window.__focused = document.activeElement")
    page.clock.run_for(11_000)
    page.wait_for_function(SETTLED)
    assert page.evaluate(
        "window.__focused.isConnected && document.activeElement === window.__focused"
    )
    # Focus elsewhere: the refresh resumes and brings the new thread in.
    page.get_by_label("Search threads").focus()
    f.make_thread(site["thread"].workspace, external_id="arrived-while-away")
    page.clock.run_for(11_000)
    page.locator("#thread-table").get_by_text("arrived-while-away").wait_for()
    page.context.close()


def test_a_rollback_preview_is_cancelled_without_inline_script(
    browser: Any, site: dict[str, Any]
) -> None:
    page = _page(browser, site, "admin")
    page.goto(f"{site['url']}/threads/{site['thread'].pk}/checkpoints/")
    page.get_by_role("button", name="Roll back…").last.click()
    preview = page.locator(".preview-box")
    preview.wait_for()
    expect(page.locator(".preview-box [onclick]")).to_have_count(0)
    preview.get_by_role("button", name="Cancel").click()
    preview.wait_for(state="detached")
    page.context.close()


def test_a_double_click_on_roll_back_rolls_back_once(browser: Any, site: dict[str, Any]) -> None:
    page = _page(browser, site, "admin")
    page.goto(f"{site['url']}/threads/{site['thread'].pk}/checkpoints/")
    page.get_by_role("button", name="Roll back…").last.click()
    preview = page.locator(".preview-box")
    preview.wait_for()
    preview.get_by_label(re.compile("Reason")).fill("summary v2 lost the refund state")
    preview.get_by_role("button", name=re.compile("Roll back to checkpoint")).dblclick()
    page.wait_for_url(re.compile(r"/summaries/\d+/$"))
    expect(page.get_by_text("Restored from checkpoint")).to_be_visible()
    assert AuditEntry.objects.filter(action="thread.rollback").count() == 1
    page.context.close()


def test_revoking_a_key_asks_first(browser: Any, site: dict[str, Any]) -> None:
    key = ApiKey.objects.get(name="default")
    page = _page(browser, site, "admin")
    page.goto(f"{site['url']}/keys/")
    row = page.locator(f"#key-{key.pk}")
    questions: list[str] = []

    def answer(dialog: Any) -> None:
        questions.append(dialog.message)
        dialog.dismiss() if len(questions) == 1 else dialog.accept()

    page.on("dialog", answer)
    row.get_by_role("button", name="Revoke").click()
    assert questions and "Revoke the key default?" in questions[0]
    key.refresh_from_db()
    assert key.revoked_at is None  # dismissed: nothing sent
    row.get_by_role("button", name="Revoke").click()
    page.wait_for_load_state()
    row.get_by_text("revoked").wait_for()
    key.refresh_from_db()
    assert key.revoked_at is not None
    page.context.close()


def test_a_long_unbroken_evidence_stays_within_the_page(browser: Any, site: dict[str, Any]) -> None:
    effect = SideEffect.objects.get(thread=site["thread"], tool_call_id="c2")
    evidence = "https://ledger.example/" + "x" * 3000
    side_effect_resolve(side_effect=effect, actor=None, status="succeeded", evidence=evidence)
    page = _page(browser, site, "operator")
    page.goto(f"{site['url']}/side-effects/?status=succeeded")
    page.get_by_text("refund").first.wait_for()
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    page.context.close()


def test_a_long_unbroken_word_in_a_summary_stays_within_the_page(
    browser: Any, site: dict[str, Any]
) -> None:
    thread = f.make_thread(site["thread"].workspace, external_id="long-word")
    f.append(thread, f.user("refund " + "x" * 5000), f.assistant("noted"))
    _fold(thread)
    thread.refresh_from_db()
    assert thread.covered_until == thread.last_seq
    page = _page(browser, site, "operator")
    page.goto(f"{site['url']}/threads/{thread.pk}/summaries/{thread.head_version}/")
    page.get_by_text("x" * 200).first.wait_for()
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    page.context.close()


def test_pages_fit_a_phone(browser: Any, site: dict[str, Any]) -> None:
    """At 390 px the navigation is a row above the page and no page scrolls sideways (a wide
    table scrolls inside its own box)."""
    page = _page(browser, site, "operator", width=390)
    thread = site["thread"]
    wide = []
    for path in (
        "/threads/",
        f"/threads/{thread.pk}/",
        f"/threads/{thread.pk}/context/",
        f"/threads/{thread.pk}/summaries/1/",
        f"/threads/{thread.pk}/checkpoints/",
        "/side-effects/",
        "/approvals/",
    ):
        page.goto(site["url"] + path)
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        if overflow > 1:
            wide.append((path, overflow))
    assert not wide
    nav = page.locator("nav.sidenav").bounding_box()
    main = page.locator("main").bounding_box()
    assert nav is not None and main is not None
    assert main["y"] >= nav["y"] + nav["height"] - 1 and main["width"] >= 360
    shot(page, "20-phone-approvals")
    page.context.close()
