"""In a browser, as a reviewer (docs/repairs.md, "Approvals"): the approvals card of a refund retry
shows the earlier refund whose outcome is unknown; approving is refused until the reviewer ticks the
acknowledgement and says how they know, and the override is audited."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests import factories as f
from tests.api.test_approval_context import KEY, retry_after_timeout
from tests.browser.test_dashboard import (  # noqa: F401 (fixtures)
    _page,
    browser,
    eager_tasks,
    shot,
    site,
)
from threads.models import ApprovalRequest, AuditEntry, Event

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_reviewer_cannot_approve_a_retry_beside_an_unknown_refund_without_acknowledging(
    browser: Any,  # noqa: F811 (a fixture)
    site: dict[str, Any],  # noqa: F811 (a fixture)
) -> None:
    workspace = site["thread"].workspace
    thread = f.make_thread(workspace, external_id="refund-4471", title="Refund of order 4471")
    approval = retry_after_timeout(thread)
    page = _page(browser, site, "reviewer")
    page.goto(f"{site['url']}/approvals/?thread=refund-4471")
    card = page.locator(f"#approval-{approval.pk}")
    related = card.locator(".related-effects")
    assert "refund_payment #2" in related.inner_text()
    assert KEY in related.inner_text() and "unknown" in related.inner_text()
    expect(card.get_by_role("alert")).to_be_visible()
    shot(page, "11b-approval-related-unknown")

    card.get_by_label("Reason (required)").fill("the customer asked again")
    card.get_by_role("button", name="Approve").click()
    notice = page.locator("#notice")
    notice.get_by_text(re.compile("related side effect")).wait_for()
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert not Event.objects.filter(thread=thread, kind="approval_decision").exists()

    card = page.locator(f"#approval-{approval.pk}")
    card.get_by_label("Reason (required)").fill("the customer asked again")
    card.get_by_label(re.compile("I checked")).check()
    card.get_by_label(re.compile("How you know")).fill("the provider's dashboard shows no refund")
    card.get_by_role("button", name="Approve").click()
    page.locator(f"#approval-{approval.pk} .badge", has_text="approved").wait_for()

    approval = ApprovalRequest.objects.get(pk=approval.pk)
    assert approval.status == "approved"
    assert Event.objects.filter(thread=thread, kind="approval_decision").count() == 1
    entry = AuditEntry.objects.get(action="approval.decide", target_id=str(approval.pk))
    assert entry.actor_label == "reviewer" and entry.after is not None
    assert entry.after["acknowledge_reason"] == "the provider's dashboard shows no refund"
    assert [e["call_seq"] for e in entry.after["acknowledged_side_effects"]] == [2]
    page.context.close()
