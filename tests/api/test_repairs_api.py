"""Side effects and approvals over the API: who may see, resolve and decide what."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from ctxadmin.celery import app as celery_app
from tests import factories as f
from tests.api.test_checkpoints_api import person, post
from tests.services.test_side_effects import ToolServer, refund, tool_server  # noqa: F401
from threads.models import (
    ApprovalRequest,
    AuditEntry,
    Event,
    SideEffect,
    TaskRun,
    Thread,
    ToolStatusCheck,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def unknown_refund(thread: Thread) -> SideEffect:
    return refund(thread)


def approval_request(thread: Thread) -> ApprovalRequest:
    f.append(
        thread,
        f.user("retry?"),
        {
            "kind": "approval_request",
            "action": "retry refund",
            "tool_name": "refund",
            "arguments": {"amount": 25},
        },
    )
    return ApprovalRequest.objects.get(thread=thread)


# --- side effects ---------------------------------------------------------------------------


def test_list_unknown_side_effects_per_workspace(
    unknown_refund: SideEffect,
    agent: APIClient,
    other_agent: APIClient,
    operator_client: APIClient,
    thread: Thread,
    workspace: Any,
) -> None:
    other_thread = f.make_thread(f.make_workspace("initech")[0], external_id="x")
    refund(other_thread)
    for client in (agent, operator_client):
        rows = client.get("/api/v1/side-effects/?status=unknown").json()
        assert [r["id"] for r in rows] == [unknown_refund.pk]
        assert rows[0] == {
            **rows[0],
            "thread": str(thread.pk),
            "tool_call_id": "c1",
            "tool_name": "refund",
            "idempotency_key": "refund-1",
            "status": "unknown",
            "call_seq": 2,
            "result_seq": 3,
            "resolutions": [],
        }
    assert other_agent.get("/api/v1/side-effects/?status=unknown").json() == []
    assert agent.get("/api/v1/side-effects/?status=succeeded").json() == []
    assert agent.get("/api/v1/side-effects/?status=bogus").status_code == 400


def test_resolve_over_the_api(
    unknown_refund: SideEffect, workspace: Any, thread: Thread, agent: APIClient
) -> None:
    target = f"/api/v1/side-effects/{unknown_refund.pk}/resolve/"
    operator = person(workspace, "operator")
    answer = post(operator, target, {"status": "failed", "evidence": "no ledger entry for R-1"})
    assert answer.status_code == 200
    body = answer.json()
    assert body["side_effect"]["status"] == "failed" and body["seq"] == 4
    assert body["side_effect"]["resolutions"] == [
        {
            **body["side_effect"]["resolutions"][0],
            "seq": 4,
            "status": "failed",
            "evidence": "no ledger entry for R-1",
            "actor": "operator-x",
        }
    ]
    # The agent sees the resolution in its log, and in the list.
    events = agent.get(f"/api/v1/threads/{thread.pk}/events/?after=3").json()
    rows = events["events"] if isinstance(events, dict) else events
    assert rows[0]["kind"] == "side_effect_resolution" and rows[0]["status"] == "failed"
    again = post(operator, target, {"status": "succeeded", "evidence": "x"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_resolved"


def test_resolve_refusals(
    unknown_refund: SideEffect, workspace: Any, agent: APIClient, other_agent: APIClient
) -> None:
    target = f"/api/v1/side-effects/{unknown_refund.pk}/resolve/"
    good = {"status": "succeeded", "evidence": "ledger #1"}
    assert post(agent, target, good).status_code == 403
    assert post(other_agent, target, good).status_code == 403  # agents never resolve
    outsider = person(f.make_workspace("initech")[0], "admin", "eve")
    assert post(outsider, target, good).status_code == 404
    operator = person(workspace, "operator")
    blank = post(operator, target, {"status": "succeeded", "evidence": "  "})
    assert blank.status_code == 400 and "evidence" in blank.json()["error"]["fields"]
    missing = post(operator, target, {"status": "succeeded"})
    assert missing.status_code == 400
    assert post(operator, target, {"status": "unknown", "evidence": "x"}).status_code == 400
    no_csrf = APIClient(enforce_csrf_checks=True)
    no_csrf.force_login(f.make_person(workspace, "otto", "operator"))
    assert post(no_csrf, target, good).status_code == 403
    assert not Event.objects.filter(kind="side_effect_resolution").exists()
    assert not AuditEntry.objects.filter(action="side_effect.resolve").exists()


@pytest.fixture
def eager() -> Iterator[None]:
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = before


def test_status_check_over_the_api(
    unknown_refund: SideEffect,
    workspace: Any,
    tool_server: ToolServer,  # noqa: F811
    eager: None,
    django_capture_on_commit_callbacks: Any,
    agent: APIClient,
) -> None:
    target = f"/api/v1/side-effects/{unknown_refund.pk}/check/"
    operator = person(workspace, "operator")
    missing = post(operator, target)
    assert missing.status_code == 409 and missing.json()["error"]["code"] == "no_status_check"
    ToolStatusCheck.objects.create(
        workspace=workspace,
        tool_name="refund",
        url_template=tool_server.url + "/r/{idempotency_key}",
    )
    tool_server.answer("refund-1", {"status": "succeeded", "at": "2026-11-29T10:00:00Z"})
    assert post(agent, target).status_code == 403

    with django_capture_on_commit_callbacks(execute=True):
        answer = post(operator, target)

    assert answer.status_code == 202
    task_id = answer.json()["task_id"]
    run = TaskRun.objects.get(pk=task_id)
    assert run.state == "SUCCESS"
    assert run.result is not None and run.result["resolved"] is True
    unknown_refund.refresh_from_db()
    assert unknown_refund.status == "succeeded"
    event = Event.objects.get(kind="side_effect_resolution")
    assert (
        event.data["actor"] == "status-check" and "2026-11-29T10:00:00Z" in event.data["evidence"]
    )
    status = agent.get(f"/api/v1/tasks/{task_id}/").json()
    assert status["state"] == "SUCCESS"


# --- approvals ------------------------------------------------------------------------------


def test_approvals_queue_decide_and_read_back(
    thread: Thread, workspace: Any, agent: APIClient, other_agent: APIClient
) -> None:
    approval = approval_request(thread)
    pending = agent.get("/api/v1/approvals/?status=pending").json()
    assert [(a["id"], a["approval_seq"], a["decision"]) for a in pending] == [
        (approval.pk, 2, None)
    ]
    assert other_agent.get("/api/v1/approvals/?status=pending").json() == []
    target = f"/api/v1/approvals/{approval.pk}/decide/"
    body = {"decision": "approve", "reason": "the first refund failed"}
    assert post(agent, target, body).status_code == 403
    assert post(person(workspace, "operator"), target, body).status_code == 403
    assert (
        post(person(f.make_workspace("initech")[0], "admin", "eve"), target, body).status_code
        == 404
    )

    reviewer = person(workspace, "reviewer")
    answer = post(reviewer, target, body)

    assert answer.status_code == 200
    decided = answer.json()
    assert decided["status"] == "approved" and decided["decision"] == "approve"
    assert decided["decided_by"] == "reviewer-x" and decided["decision_seq"] == 3
    second = post(person(workspace, "admin"), target, {"decision": "reject", "reason": "no"})
    assert second.status_code == 409 and second.json()["error"]["code"] == "already_decided"
    # The agent polls its thread for the decision.
    read_back = agent.get(f"/api/v1/threads/{thread.external_id}/approvals/").json()
    assert [(a["approval_seq"], a["decision"], a["reason"]) for a in read_back] == [
        (2, "approve", "the first refund failed")
    ]
    assert agent.get("/api/v1/approvals/?status=pending").json() == []
    assert other_agent.get(f"/api/v1/threads/{thread.pk}/approvals/").status_code == 404


@pytest.mark.parametrize("any_status", ["any", ""])
def test_approvals_by_any_status_are_every_one(
    thread: Thread, workspace: Any, agent: APIClient, any_status: str
) -> None:
    approval = approval_request(thread)
    f.append(thread, {"kind": "approval_request", "action": "second", "arguments": {}})
    post(
        person(workspace, "reviewer"),
        f"/api/v1/approvals/{approval.pk}/decide/",
        {"decision": "reject", "reason": "no"},
    )
    for url in ("/api/v1/approvals/", f"/api/v1/threads/{thread.pk}/approvals/"):
        every = agent.get(f"{url}?status={any_status}")
        assert every.status_code == 200
        assert sorted(a["status"] for a in every.json()) == ["pending", "rejected"]
    assert agent.get("/api/v1/approvals/?status=bogus").status_code == 400


def test_decide_needs_a_reason(thread: Thread, workspace: Any) -> None:
    approval = approval_request(thread)
    answer = post(
        person(workspace, "reviewer"),
        f"/api/v1/approvals/{approval.pk}/decide/",
        {"decision": "reject"},
    )
    assert answer.status_code == 400 and "reason" in answer.json()["error"]["fields"]
