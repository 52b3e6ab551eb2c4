"""In a browser (docs/dashboard.md, "Run status"): a whole approval round trip as the reviewer
sees it — the agent asks (waiting for a person), the reviewer approves (waiting for the agent,
the card says "not picked up yet"), the agent reads through the Python client (running, the
card says "picked up") — and a stalled agent as an operator finds it: the chip, the banner's
link, the list's filter and its place in the severity order."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from ctxadmin_client import Client
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect

from tests.browser.test_dashboard import (  # noqa: F401 (fixtures)
    _page,
    browser,
    eager_tasks,
    shot,
    site,
)
from threads.models import ApprovalRequest, Thread
from threads.services.approvals import approval_decide
from threads.services.workspaces import api_key_create

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def agent_for(served: dict[str, Any]) -> Client:
    """The Python client with a key of the site's workspace."""
    secret = api_key_create(workspace=served["thread"].workspace, name="refund agent")
    return Client(served["url"], secret)


def chip(page: Any) -> str:
    return page.locator("#run-status [data-run-status]").get_attribute("data-run-status") or ""


def test_a_whole_approval_round_trip_in_the_browser(
    browser: Any,  # noqa: F811 (a fixture)
    site: dict[str, Any],  # noqa: F811 (a fixture)
) -> None:
    with agent_for(site) as agent:
        thread = agent.thread("refund-5521", title="Refund of order 5521")
        thread.append({"kind": "message", "role": "user", "content": "Refund order 5521."})
        asked = thread.request_approval(
            "Refund €89.90 for order 5521", {"order_id": "5521"}, tool_name="refund_payment"
        )
        page = _page(browser, site, "reviewer")
        page.goto(f"{site['url']}/threads/{thread.id}/")
        assert chip(page) == "waiting_for_person"
        assert "waiting for a person" in page.locator("#run-status").inner_text()

        page.goto(f"{site['url']}/approvals/?thread=refund-5521")
        card = page.locator(f"#approval-{asked['id']}")
        card.get_by_label("Reason (required)").fill("the order is in the refund window")
        card.get_by_role("button", name="Approve").click()
        page.locator(f"#approval-{asked['id']} .badge", has_text="approved").wait_for()
        pickup = page.locator(f"#approval-{asked['id']} .picked-up")
        assert pickup.inner_text() == "not picked up yet by the agent"

        page.goto(f"{site['url']}/threads/{thread.id}/")
        assert chip(page) == "waiting_for_agent"
        assert "since" in page.locator("#run-status").inner_text()
        waiting = page.locator(".agent-pickups")
        assert "approval decided" in waiting.inner_text()
        assert "approve: the order is in the refund window" in waiting.inner_text()
        assert (
            page.locator(".event-card .picked-up, .picked-up").first.inner_text()
            == "not picked up yet by the agent"
        )
        shot(page, "21-run-status-waiting-for-agent")

        # The agent resumes: it reads its approvals (the decision) and its context.
        decided = thread.wait_for_decision(asked["id"], timeout=10, poll_interval=0.2)
        assert decided["status"] == "approved"
        thread.context()

        page.reload()
        assert chip(page) in ("running", "idle")
        expect(page.locator(".agent-pickups")).to_have_count(0)
        assert page.locator(".picked-up").first.inner_text() == "picked up by the agent"
        page.goto(f"{site['url']}/approvals/?thread=refund-5521&status=any")
        assert (
            page.locator(f"#approval-{asked['id']} .picked-up").inner_text()
            == "picked up by the agent"
        )
        page.context.close()


def test_a_stalled_agent_is_a_problem_an_operator_finds(
    browser: Any,  # noqa: F811 (a fixture)
    site: dict[str, Any],  # noqa: F811 (a fixture)
) -> None:
    with agent_for(site) as agent:
        thread = agent.thread("refund-7731", title="Refund of order 7731")
        asked = thread.request_approval("Refund €12 for order 7731", {"order_id": "7731"})
    approval = ApprovalRequest.objects.select_related("thread__workspace").get(pk=asked["id"])
    reviewer = get_user_model().objects.get(username="reviewer")
    approval_decide(approval=approval, actor=reviewer, decision="approve", reason="fine")
    # The agent never came back: the decision is older than the workspace's 15 minutes.
    Thread.objects.filter(pk=thread.id).update(
        agent_owed_since=timezone.now() - timedelta(minutes=20)
    )

    page = _page(browser, site, "operator")
    # The list's default order is the severity's: the stalled thread comes before every thread
    # with no problem (after the broken chain and the unknown refund).
    names = page.locator("#thread-table tbody a.strong").all_inner_texts()
    assert names.index("refund-7731") < names.index("ticket-4200")
    assert names.index("ticket-tampered") < names.index("refund-7731")
    row = page.locator("#thread-table tbody tr").filter(has_text="refund-7731")
    assert row.locator(".run-status-badge").inner_text() == "stalled"
    expect(row.get_by_role("link", name="agent stalled")).to_be_visible()

    page.get_by_label("Run status").select_option("stalled")
    page.wait_for_url(re.compile(r"run_status=stalled"))
    page.locator("#thread-table tbody a.strong", has_text="refund-7731").wait_for()
    assert page.locator("#thread-table tbody a.strong").all_inner_texts() == ["refund-7731"]

    page.goto(f"{site['url']}/threads/{thread.id}/")
    assert chip(page) == "stalled"
    banner = page.locator(".problem-banner")
    assert "agent stalled" in banner.inner_text()
    assert "has never read" not in banner.inner_text()  # it read its approvals when it asked
    banner.get_by_role("link", name="Look at the agent and its last read").click()
    page.wait_for_url(re.compile(r"#run-status$"))
    assert "Its last read" in page.locator(".agent-pickups").inner_text()
    shot(page, "22-run-status-stalled")

    page.goto(f"{site['url']}/operations/")
    stalled = page.locator('#run-status-counts a[data-run-status="stalled"]')
    assert stalled.locator(".run-status-count").inner_text() == "1"
    page.context.close()
