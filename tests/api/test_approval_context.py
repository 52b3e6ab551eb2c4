"""An approval sees what bears on it (docs/api.md, "Side effects and approvals", docs/repairs.md,
"Approvals"): the side effects related to its action, the messages before it and the thread's
constraints; approving beside one whose outcome is unknown is refused unless the reviewer
acknowledges it."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests import factories as f
from tests.api.test_checkpoints_api import person, post
from threads.models import ApprovalRequest, AuditEntry, Event, SideEffect, Thread
from threads.services.side_effects import side_effect_resolve

pytestmark = pytest.mark.django_db

KEY = "refund-4471-8990"


def retry_after_timeout(thread: Thread) -> ApprovalRequest:
    """The demo's story: a refund whose call timed out (unknown), then a request to retry it
    with the same idempotency key."""
    f.append(
        thread,
        f.user("I still have not received my refund of 89.90 for order 4471."),
        f.call("call_refund", "refund_payment", {"order_id": "4471"}, side_effect_key=KEY),
        f.result("call_refund", "timeout"),
        f.assistant("The refund timed out; I will ask before retrying."),
        {
            "kind": "approval_request",
            "action": "Retry refund of €89.90 for order 4471",
            "tool_name": "refund_payment",
            "arguments": {"order_id": "4471", "idempotency_key": KEY},
        },
    )
    return ApprovalRequest.objects.get(thread=thread)


def decisions_read_back(agent: APIClient, thread: Thread) -> list[Any]:
    rows = agent.get(f"/api/v1/threads/{thread.id}/approvals/").json()
    return [row["decision"] for row in rows]


def test_the_answer_names_the_unknown_refund_the_messages_and_the_constraints(
    thread: Thread, agent: APIClient
) -> None:
    f.append(thread, f.annotation("constraint", "user", {"text": "never refund twice"}))
    approval = retry_after_timeout(thread)
    (row,) = agent.get("/api/v1/approvals/?status=pending").json()
    assert row["id"] == approval.pk
    assert [
        (r["tool_name"], r["call_seq"], r["status"], r["match"], r["idempotency_key"])
        for r in row["related_side_effects"]
    ] == [("refund_payment", 3, "unknown", "idempotency_key", KEY)]
    assert [(m["role"], m["seq"]) for m in row["recent_messages"]] == [
        ("user", 2),
        ("assistant", 5),
    ]
    assert "timed out" in row["recent_messages"][-1]["text"]
    assert [c["text"] for c in row["active_constraints"]] == ["never refund twice"]


def test_approving_beside_an_unknown_refund_is_refused_and_nothing_reaches_the_agent(
    thread: Thread, workspace: Any, agent: APIClient
) -> None:
    approval = retry_after_timeout(thread)
    reviewer = person(workspace, "reviewer")
    before = Event.objects.filter(thread=thread).count()
    answer = post(
        reviewer,
        f"/api/v1/approvals/{approval.pk}/decide/",
        {"decision": "approve", "reason": "customer asked again"},
    )
    assert answer.status_code == 409
    error = answer.json()["error"]
    assert error["code"] == "related_side_effect_unknown"
    assert [(r["call_seq"], r["status"]) for r in error["fields"]["related_side_effects"]] == [
        (2, "unknown")
    ]
    assert "refund_payment #2" in error["message"]
    assert decisions_read_back(agent, thread) == [None]
    assert Event.objects.filter(thread=thread).count() == before
    assert not AuditEntry.objects.filter(action="approval.decide").exists()


def test_acknowledging_needs_a_reason(thread: Thread, workspace: Any) -> None:
    approval = retry_after_timeout(thread)
    answer = post(
        person(workspace, "reviewer"),
        f"/api/v1/approvals/{approval.pk}/decide/",
        {"decision": "approve", "reason": "retry", "acknowledge_unknown": True},
    )
    assert answer.status_code == 400
    assert "acknowledge_reason" in answer.json()["error"]["fields"]
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_an_acknowledged_override_approves_and_the_audit_names_the_side_effect(
    thread: Thread, workspace: Any, agent: APIClient
) -> None:
    approval = retry_after_timeout(thread)
    answer = post(
        person(workspace, "reviewer", "rex"),
        f"/api/v1/approvals/{approval.pk}/decide/",
        {
            "decision": "approve",
            "reason": "retry the refund",
            "acknowledge_unknown": True,
            "acknowledge_reason": "the payment provider shows no refund for 4471",
        },
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["decision"] == "approve"
    assert decisions_read_back(agent, thread) == ["approve"]
    entry = AuditEntry.objects.get(action="approval.decide")
    assert entry.actor_label == "rex"
    assert entry.after is not None
    assert entry.after["acknowledge_reason"] == "the payment provider shows no refund for 4471"
    assert [
        (e["tool_name"], e["call_seq"], e["idempotency_key"], e["status"])
        for e in entry.after["acknowledged_side_effects"]
    ] == [("refund_payment", 2, KEY, "unknown")]


def test_rejecting_is_never_refused(thread: Thread, workspace: Any, agent: APIClient) -> None:
    approval = retry_after_timeout(thread)
    answer = post(
        person(workspace, "reviewer"),
        f"/api/v1/approvals/{approval.pk}/decide/",
        {"decision": "reject", "reason": "resolve the first refund first"},
    )
    assert answer.status_code == 200
    assert decisions_read_back(agent, thread) == ["reject"]


def test_once_resolved_the_refund_no_longer_blocks_approval(
    thread: Thread, workspace: Any, agent: APIClient
) -> None:
    approval = retry_after_timeout(thread)
    operator = f.make_person(workspace, "olga", "operator")
    side_effect_resolve(
        side_effect=SideEffect.objects.get(thread=thread),
        actor=operator,
        status="failed",
        evidence="provider: no refund for order 4471",
    )
    answer = post(
        person(workspace, "reviewer"),
        f"/api/v1/approvals/{approval.pk}/decide/",
        {"decision": "approve", "reason": "the first one failed"},
    )
    assert answer.status_code == 200
    assert [r["status"] for r in answer.json()["related_side_effects"]] == ["failed"]
    assert decisions_read_back(agent, thread) == ["approve"]


def test_a_running_call_of_the_same_tool_blocks_too(
    thread: Thread, workspace: Any, agent: APIClient
) -> None:
    f.append(
        thread,
        f.call("call_a", "refund_payment", {"order_id": "1"}, side_effect_key="refund-1"),
        {
            "kind": "approval_request",
            "action": "refund order 2",
            "tool_name": "refund_payment",
            "arguments": {"order_id": "2"},
        },
    )
    approval = ApprovalRequest.objects.get(thread=thread)
    answer = post(
        person(workspace, "reviewer"),
        f"/api/v1/approvals/{approval.pk}/decide/",
        {"decision": "approve", "reason": "go"},
    )
    assert answer.status_code == 409
    (related,) = answer.json()["error"]["fields"]["related_side_effects"]
    assert (related["status"], related["match"]) == ("running", "tool")
    assert decisions_read_back(agent, thread) == [None]


def test_an_unrelated_tool_does_not_block(thread: Thread, workspace: Any) -> None:
    f.append(
        thread,
        f.call("call_a", "send_email", {"to": "a"}, side_effect_key="mail-1"),
        f.result("call_a", "timeout"),
        {
            "kind": "approval_request",
            "action": "refund order 2",
            "tool_name": "refund_payment",
            "arguments": {"order_id": "2"},
        },
    )
    approval = ApprovalRequest.objects.get(thread=thread)
    answer = post(
        person(workspace, "reviewer"),
        f"/api/v1/approvals/{approval.pk}/decide/",
        {"decision": "approve", "reason": "go"},
    )
    assert answer.status_code == 200
    assert answer.json()["related_side_effects"] == []


def test_the_call_an_interrupt_asks_about_does_not_block_its_own_approval(
    thread: Thread, workspace: Any, agent: APIClient
) -> None:
    """A LangGraph interrupt before a tool runs: the pending call is stored (`running`) and the
    request names it by `tool_call_id`; approving it is what lets it run."""
    f.append(
        thread,
        f.call("call_9", "refund", {"order_id": "5521"}, side_effect_key="refund-5521"),
        {
            "kind": "approval_request",
            "action": "langgraph.interrupt",
            "tool_name": "refund",
            "arguments": {
                "interrupt_id": "int-1",
                "checkpoint_ns": "",
                "checkpoint_id": "ck-1",
                "tool_name": "refund",
                "tool_call_id": "call_9",
                "tool_arguments": {"order_id": "5521", "idempotency_key": "refund-5521"},
            },
        },
    )
    approval = ApprovalRequest.objects.get(thread=thread)
    answer = post(
        person(workspace, "reviewer"),
        f"/api/v1/approvals/{approval.pk}/decide/",
        {"decision": "approve", "reason": "go"},
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["related_side_effects"] == []
    assert decisions_read_back(agent, thread) == ["approve"]
