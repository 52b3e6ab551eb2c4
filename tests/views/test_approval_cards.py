"""The approvals queue's card shows what bears on a request (docs/repairs.md, "Approvals") and
refuses an approval beside an unknown related side effect until the reviewer acknowledges it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests import factories as f
from tests.api.test_approval_context import KEY, retry_after_timeout
from threads.models import ApprovalRequest, AuditEntry, Thread

pytestmark = pytest.mark.django_db


@pytest.fixture
def refund_thread(workspace: Any) -> Thread:
    return f.make_thread(workspace, external_id="refund-4471", title="Refund")


def _card(page: str, approval: ApprovalRequest) -> str:
    return page.split(f'id="approval-{approval.pk}"', 1)[1].split("</article>", 1)[0]


def test_the_card_shows_the_unknown_refund_and_the_messages_before(
    reviewer: Client, refund_thread: Thread
) -> None:
    approval = retry_after_timeout(refund_thread)
    card = _card(reviewer.get("/approvals/").content.decode(), approval)
    assert "Related side effects" in card
    assert "refund_payment #2" in card and KEY in card and "same idempotency key" in card
    assert "unknown" in card
    assert "I will ask before retrying" in card
    assert "Approving may do this twice" in card
    assert 'name="acknowledge_unknown"' in card and 'name="acknowledge_reason"' in card


def test_approve_is_refused_until_acknowledged_with_a_reason(
    reviewer: Client, refund_thread: Thread
) -> None:
    approval = retry_after_timeout(refund_thread)
    target = f"/approvals/{approval.pk}/decide/"
    refused = reviewer.post(
        target, {"decision": "approve", "reason": "retry"}, HTTP_HX_REQUEST="true"
    )
    assert refused.status_code == 409
    body = refused.content.decode()
    assert "refund_payment #2" in body
    # The card comes along as it stands, with the box to acknowledge the refund.
    assert 'name="acknowledge_unknown"' in body
    approval.refresh_from_db()
    assert approval.status == "pending"
    ticked_without_reason = reviewer.post(
        target, {"decision": "approve", "reason": "retry", "acknowledge_unknown": "on"}
    )
    assert ticked_without_reason.status_code == 400
    approval.refresh_from_db()
    assert approval.status == "pending"
    done = reviewer.post(
        target,
        {
            "decision": "approve",
            "reason": "retry",
            "acknowledge_unknown": "on",
            "acknowledge_reason": "the provider shows no refund",
        },
        HTTP_HX_REQUEST="true",
    )
    assert done.status_code == 200
    approval.refresh_from_db()
    assert approval.status == "approved"
    entry = AuditEntry.objects.get(action="approval.decide", target_id=str(approval.pk))
    assert entry.after is not None
    assert [e["idempotency_key"] for e in entry.after["acknowledged_side_effects"]] == [KEY]


def test_reject_needs_no_acknowledgement(reviewer: Client, refund_thread: Thread) -> None:
    approval = retry_after_timeout(refund_thread)
    answer = reviewer.post(
        f"/approvals/{approval.pk}/decide/", {"decision": "reject", "reason": "resolve it first"}
    )
    assert answer.status_code in (200, 302, 303)
    approval.refresh_from_db()
    assert approval.status == "rejected"


def test_a_langgraph_interrupt_reads_as_the_call_it_asks_about(
    reviewer: Client, refund_thread: Thread
) -> None:
    f.append(
        refund_thread,
        f.user("refund order 5521"),
        {
            "kind": "approval_request",
            "action": "langgraph.interrupt",
            "tool_name": "refund",
            "arguments": {
                "interrupt_id": "int-77",
                "checkpoint_ns": "",
                "checkpoint_id": "1f0-ckpt",
                "value": {"question": "approve the refund?"},
                "tool_name": "refund",
                "tool_call_id": "call_9",
                "tool_arguments": {"order_id": "5521", "amount": 89.9},
            },
        },
    )
    approval = ApprovalRequest.objects.get(thread=refund_thread)
    card = _card(reviewer.get("/approvals/").content.decode(), approval)
    head, rest = card.split("<h3>Arguments</h3>", 1)
    assert "refund(amount=89.9, order_id=5521)" in head
    assert "langgraph.interrupt" not in head
    arguments, folded = rest.split("<details", 1)
    assert "5521" in arguments and "1f0-ckpt" not in arguments and "int-77" not in arguments
    assert "1f0-ckpt" in folded and "int-77" in folded
    # The thread's problem banner names the call too, not the interrupt.
    page = reviewer.get(f"/threads/{refund_thread.pk}/").content.decode()
    banner = page.split("problem-banner", 1)[1].split("</section>", 1)[0]
    assert "Approval pending: refund(amount=89.9, order_id=5521)" in banner
    assert "langgraph.interrupt" not in banner


def test_the_timeline_approval_card_names_the_unknown_refund(
    reviewer: Client, refund_thread: Thread
) -> None:
    approval = retry_after_timeout(refund_thread)
    page = reviewer.get(f"/threads/{refund_thread.pk}/").content.decode()
    card = page.split(f'id="seq-{approval.request_event.seq}"', 1)[1].split("</article>", 1)[0]
    assert "Related side effects" in card
    assert "refund_payment #2" in card and KEY in card and "unknown" in card
    assert "Approving may do this twice" in card
