"""An approval whose `expires_at` passes undecided (docs/repairs.md, "Approvals", docs/api.md,
"Approvals"): the API says `expired`, the dashboard's approvals page and the thread's timeline show
it expired, nobody can approve or reject it (409 `approval_expired` in the error shape, a
message on the dashboard), and the agent reading its approvals back sees it expired.

The clock is moved, not waited for: `timezone.now` answers two hours later once the request
is in."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tests import factories as f
from tests.views.conftest import login
from threads import selectors
from threads.models import ApprovalRequest, AuditEntry, Event, EventKind, Thread
from threads.selectors.metrics import approval_figures, approval_spans

pytestmark = pytest.mark.django_db


@pytest.fixture
def asked(agent: APIClient, thread: Thread) -> ApprovalRequest:
    """A request that expires in an hour, and one without expiry beside it."""
    in_an_hour = (timezone.now() + timedelta(hours=1)).isoformat()
    url = f"/api/v1/threads/{thread.id}/events/"
    body = {
        "events": [
            {
                "kind": "approval_request",
                "action": "refund",
                "arguments": {"order": 1},
                "expires_at": in_an_hour,
            },
            {"kind": "approval_request", "action": "note", "arguments": {}},
        ]
    }
    assert agent.post(url, body, format="json").status_code == 201
    return ApprovalRequest.objects.get(thread=thread, action="refund")


@pytest.fixture
def reviewer_api(workspace: Any) -> APIClient:
    client = APIClient()
    client.force_login(f.make_person(workspace, "rita", "reviewer"))
    return client


def later(monkeypatch: pytest.MonkeyPatch, hours: int = 2) -> None:
    moved = timezone.now() + timedelta(hours=hours)
    monkeypatch.setattr(timezone, "now", lambda: moved)


def rows(agent: APIClient, thread: Thread, query: str = "") -> dict[str, dict[str, Any]]:
    answer = agent.get(f"/api/v1/threads/{thread.id}/approvals/{query}")
    assert answer.status_code == 200
    return {row["action"]: row for row in answer.json()}


def test_before_expiry_it_is_pending_and_not_expired(
    agent: APIClient, thread: Thread, asked: ApprovalRequest
) -> None:
    row = rows(agent, thread)["refund"]
    assert (row["status"], row["expired"], row["decision"]) == ("pending", False, None)
    assert rows(agent, thread, "?expired=true") == {}


def test_past_expiry_the_agent_reads_it_back_expired(
    agent: APIClient, thread: Thread, asked: ApprovalRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    later(monkeypatch)
    both = rows(agent, thread)
    assert (both["refund"]["status"], both["refund"]["expired"]) == ("pending", True)
    assert both["refund"]["decision"] is None
    assert both["note"]["expired"] is False  # no expires_at: never expires
    assert set(rows(agent, thread, "?expired=true")) == {"refund"}
    assert set(rows(agent, thread, "?expired=false")) == {"note"}
    listed = agent.get("/api/v1/approvals/?status=pending&expired=false").json()
    assert [row["action"] for row in listed] == ["note"]
    assert agent.get("/api/v1/approvals/?expired=").status_code == 400  # empty: refused


def test_past_expiry_it_cannot_be_approved_or_rejected_through_the_api(
    reviewer_api: APIClient,
    agent: APIClient,
    thread: Thread,
    asked: ApprovalRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    later(monkeypatch)
    for decision in ("approve", "reject"):
        answer = reviewer_api.post(
            f"/api/v1/approvals/{asked.pk}/decide/",
            {"decision": decision, "reason": "too late"},
            format="json",
        )
        assert answer.status_code == 409
        error = answer.json()["error"]
        assert error["code"] == "approval_expired"
        assert "expired" in error["message"]
        assert set(error["fields"]) == {"expires_at"}
    asked.refresh_from_db()
    assert asked.status == "pending" and asked.decision_event_id is None
    assert not Event.objects.filter(thread=thread, kind=EventKind.APPROVAL_DECISION).exists()
    assert not AuditEntry.objects.filter(action="approval.decide").exists()
    assert rows(agent, thread)["refund"]["expired"] is True


def test_a_decision_before_expiry_stands_after_it(
    reviewer_api: APIClient,
    agent: APIClient,
    thread: Thread,
    asked: ApprovalRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answer = reviewer_api.post(
        f"/api/v1/approvals/{asked.pk}/decide/",
        {"decision": "approve", "reason": "in time"},
        format="json",
    )
    assert answer.status_code == 200 and answer.json()["expired"] is False
    later(monkeypatch)
    row = rows(agent, thread)["refund"]
    assert (row["status"], row["decision"], row["expired"]) == ("approved", "approve", False)


def test_the_dashboard_shows_it_expired_and_refuses_a_decision(
    workspace: Any, thread: Thread, asked: ApprovalRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    reviewer = login(workspace, "reviewer")
    before = reviewer.get("/approvals/").content.decode()
    assert f'id="approval-{asked.pk}"' in before and "Approve</button>" in before
    later(monkeypatch)
    queue = reviewer.get("/approvals/").content.decode()
    assert f'id="approval-{asked.pk}"' not in queue  # no longer waits for a reviewer
    expired = reviewer.get("/approvals/?status=expired").content.decode()
    card = expired[expired.index(f'id="approval-{asked.pk}"') :]
    card = card[: card.index("</article>")]
    assert '<span class="badge badge-muted">expired</span>' in card
    assert "can no longer be approved or rejected" in card
    assert "Approve</button>" not in card and "<textarea" not in card
    assert 'value="expired" selected' in expired
    timeline = reviewer.get(f"/threads/{thread.pk}/?from=1").content.decode()
    request_card = timeline[timeline.index(f'id="seq-{asked.request_event.seq}"') :]
    assert "approval expired</span>" in request_card[: request_card.index("</article>")]
    assert "approval pending</span>" in timeline  # the other request, no expiry

    plain = reviewer.post(
        f"/approvals/{asked.pk}/decide/", {"decision": "approve", "reason": "late"}
    )
    assert plain.status_code == 409
    assert "Refused (approval_expired)" in plain.content.decode()
    swapped = reviewer.post(
        f"/approvals/{asked.pk}/decide/",
        {"decision": "reject", "reason": "late"},
        headers={"HX-Request": "true"},
    )
    assert swapped.status_code == 409 and swapped["HX-Retarget"] == "#notice"
    assert "expired at" in swapped.content.decode()
    asked.refresh_from_db()
    assert asked.status == "pending"


def test_past_expiry_it_no_longer_counts_as_waiting(
    agent: APIClient, thread: Thread, asked: ApprovalRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread list's "pending approval" flag, the pending-approvals gauge and the
    Operations page's pending series count the requests a reviewer can still decide."""
    ApprovalRequest.objects.filter(thread=thread).exclude(pk=asked.pk).delete()
    since = timezone.now() - timedelta(minutes=5)

    def flagged() -> bool:
        return selectors.threads_in(workspace_ids=[thread.workspace_id], pending=True).exists()

    assert flagged() and approval_figures()["pending"] == 1
    (span,) = approval_spans(workspace_ids=[thread.workspace_id], since=since)
    assert span == (asked.created_at, asked.expires_at)  # ends when it expires
    later(monkeypatch)
    assert not flagged()
    assert approval_figures()["pending"] == 0
    assert approval_figures()["oldest"] is None
