"""A thread's run status over the API (docs/api.md, "Read — `GET /api/v1/threads/{id}/`",
docs/dashboard.md, "Run status"): what it waits for, derived from the log and from the agent's
reads, in the thread answer, the list and its filter, and the stalled agent as a problem."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from tests import factories as f
from tests.api.test_checkpoints_api import person, post, url
from tests.api.test_imports import TWO_CHATS, eager, imported  # noqa: F401 (eager: a fixture)
from tests.services.test_checkpoints import two_versions
from threads.models import ApprovalRequest, SideEffect, Thread, Workspace
from threads.services.run_status import agent_read_record

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_fold_triggers")]

LONG_AGO = timedelta(hours=2)


def status_of(client: APIClient, thread: Thread) -> dict[str, Any]:
    return client.get(f"/api/v1/threads/{thread.pk}/").json()


def listed(client: APIClient, run_status: str) -> list[str]:
    answer = client.get("/api/v1/threads/", {"run_status": run_status})
    assert answer.status_code == 200, answer.content
    return sorted(t["external_id"] for t in answer.json()["results"])


def quiet(thread: Thread) -> None:
    """The agent's last append and read were long ago (nothing else changes)."""
    Thread.objects.filter(pk=thread.pk).update(
        agent_appended_at=timezone.now() - LONG_AGO, agent_read_at=None
    )


def ask_approval(thread: Thread) -> ApprovalRequest:
    f.append(
        thread,
        f.user("refund order 5521 please"),
        {
            "kind": "approval_request",
            "action": "Refund €89.90 for order 5521",
            "tool_name": "refund_payment",
            "arguments": {"order_id": "5521"},
        },
    )
    return ApprovalRequest.objects.get(thread=thread)


def decide(workspace: Workspace, approval: ApprovalRequest, decision: str = "approve") -> None:
    reviewer = person(workspace, "reviewer")
    answer = post(
        reviewer,
        f"/api/v1/approvals/{approval.pk}/decide/",
        {"decision": decision, "reason": "checked the order"},
    )
    assert answer.status_code == 200, answer.content


def test_an_agent_that_appends_is_running_and_then_idle(
    thread: Thread, agent: APIClient, workspace: Workspace
) -> None:
    f.append(thread, f.user("hello"))
    body = status_of(agent, thread)
    assert body["run_status"] == "running"
    assert body["run_status_since"] is None and body["problems"] == []
    quiet(thread)
    assert status_of(agent, thread)["run_status"] == "idle"
    assert listed(agent, "idle") == [thread.external_id]
    assert listed(agent, "running") == []


def test_a_round_trip_of_an_approval(
    thread: Thread, agent: APIClient, workspace: Workspace
) -> None:
    approval = ask_approval(thread)
    quiet(thread)
    assert status_of(agent, thread)["run_status"] == "waiting_for_person"
    assert listed(agent, "waiting_for_person") == [thread.external_id]

    decide(workspace, approval)
    body = status_of(agent, thread)
    assert body["run_status"] == "waiting_for_agent"
    assert body["run_status_since"] is not None
    assert listed(agent, "waiting_for_agent") == [thread.external_id]
    assert listed(agent, "waiting_for_person") == []

    # A person reading the context picks up nothing: only the agent's read does.
    operator = person(workspace, "operator")
    assert operator.get(f"/api/v1/threads/{thread.pk}/context/").status_code == 200
    assert status_of(agent, thread)["run_status"] == "waiting_for_agent"
    assert picked_up(operator, approval) is False

    assert agent.get(f"/api/v1/threads/{thread.pk}/context/").status_code == 200
    body = status_of(agent, thread)
    assert body["run_status"] == "running"  # it read just now
    assert body["run_status_since"] is None and body["agent_read_at"] is not None
    assert listed(agent, "waiting_for_agent") == []
    assert picked_up(operator, approval) is True


def picked_up(client: APIClient, approval: ApprovalRequest) -> bool | None:
    """The approval's `agent_picked_up` as the approvals list answers it."""
    answer = client.get("/api/v1/approvals/", {"status": "any"})
    assert answer.status_code == 200, answer.content
    (row,) = [a for a in answer.json() if a["id"] == approval.pk]
    return row["agent_picked_up"]


def test_reading_the_approvals_picks_up_a_decision(
    thread: Thread, agent: APIClient, workspace: Workspace
) -> None:
    approval = ask_approval(thread)
    decide(workspace, approval, "reject")
    assert status_of(agent, thread)["run_status"] == "waiting_for_agent"
    assert agent.get(f"/api/v1/threads/{thread.pk}/approvals/").status_code == 200
    assert status_of(agent, thread)["run_status"] == "running"


def test_reading_the_langgraph_checkpoints_picks_up_a_decision(
    thread: Thread, agent: APIClient, workspace: Workspace
) -> None:
    approval = ask_approval(thread)
    decide(workspace, approval)
    assert status_of(agent, thread)["run_status"] == "waiting_for_agent"
    listing = agent.get(f"/api/v1/threads/{thread.external_id}/langgraph/checkpoints/")
    assert listing.status_code == 200, listing.content
    assert status_of(agent, thread)["run_status"] == "running"


def test_a_decision_after_what_the_read_saw_is_not_picked_up(
    thread: Thread, agent: APIClient, workspace: Workspace
) -> None:
    """The read picks up what the thread owed when it read the row, before its answer: a
    decision that commits while the answer is being read waits for the next read."""
    first = ask_approval(thread)
    decide(workspace, first)
    seen = Thread.objects.get(pk=thread.pk)  # the row as a read loaded it
    f.append(
        thread,
        {"kind": "approval_request", "action": "Refund again", "arguments": {"order_id": "1"}},
    )
    second = ApprovalRequest.objects.get(thread=thread, action="Refund again")
    decide(workspace, second)
    assert agent_read_record(thread=seen)
    assert status_of(agent, thread)["run_status"] == "waiting_for_agent"
    assert agent.get(f"/api/v1/threads/{thread.pk}/context/").status_code == 200
    assert status_of(agent, thread)["run_status"] == "running"


def test_a_resolution_and_a_rollback_wait_for_the_agent(
    thread: Thread, agent: APIClient, workspace: Workspace
) -> None:
    first, _ = two_versions(thread)
    # The refund timed out: a person has to settle it.
    assert status_of(agent, thread)["run_status"] == "waiting_for_person"
    effect = SideEffect.objects.get(thread=thread, idempotency_key="refund-10086")
    operator = person(workspace, "operator")
    resolved = post(
        operator,
        f"/api/v1/side-effects/{effect.pk}/resolve/",
        {"status": "failed", "evidence": "the payment provider has no such refund"},
    )
    assert resolved.status_code == 200, resolved.content
    assert status_of(agent, thread)["run_status"] == "waiting_for_agent"
    assert agent.get(f"/api/v1/threads/{thread.pk}/context/").status_code == 200
    assert status_of(agent, thread)["run_status"] == "running"

    admin = person(workspace, "admin")
    rolled = post(admin, url(thread, "rollback/"), {"checkpoint": first.pk, "reason": "bad fold"})
    assert rolled.status_code == 200, rolled.content
    assert status_of(agent, thread)["run_status"] == "waiting_for_agent"


def test_an_agent_that_does_not_pick_up_stalls(
    thread: Thread, agent: APIClient, workspace: Workspace
) -> None:
    other = f.make_thread(workspace, external_id="busy")
    f.append(other, f.user("still going"))
    approval = ask_approval(thread)
    decide(workspace, approval)
    Workspace.objects.filter(pk=workspace.pk).update(stall_after_seconds=60)
    assert status_of(agent, thread)["run_status"] == "waiting_for_agent"
    Thread.objects.filter(pk=thread.pk).update(
        agent_owed_since=timezone.now() - timedelta(seconds=61)
    )
    body = status_of(agent, thread)
    assert body["run_status"] == "stalled"
    assert [p["kind"] for p in body["problems"]] == ["agent_stalled"]
    assert body["problems"][0]["action_url"].endswith("#run-status")
    assert listed(agent, "stalled") == [thread.external_id]
    assert listed(agent, "waiting_for_agent") == []
    page = agent.get("/api/v1/threads/", {"run_status": "stalled"}).json()
    assert [p["kind"] for p in page["results"][0]["problems"]] == ["agent_stalled"]

    # A longer setting: the same wait is not a stall yet.
    Workspace.objects.filter(pk=workspace.pk).update(stall_after_seconds=3600)
    assert status_of(agent, thread)["run_status"] == "waiting_for_agent"


def test_a_thread_that_waits_for_a_person_is_not_stalled(
    thread: Thread, agent: APIClient, workspace: Workspace
) -> None:
    approval = ask_approval(thread)
    decide(workspace, approval)
    Thread.objects.filter(pk=thread.pk).update(agent_owed_since=timezone.now() - LONG_AGO)
    assert status_of(agent, thread)["run_status"] == "stalled"
    ask_approval_again = {"kind": "approval_request", "action": "Refund the rest", "arguments": {}}
    f.append(thread, ask_approval_again)
    assert status_of(agent, thread)["run_status"] == "waiting_for_person"


def test_a_call_held_running_waits_for_a_person(thread: Thread, agent: APIClient) -> None:
    f.append(thread, f.call("c1", "refund", {"order": 1}, side_effect_key="refund-1"))
    # Just called: the tool is running, so is the agent.
    assert status_of(agent, thread)["run_status"] == "running"
    SideEffect.objects.filter(thread=thread).update(updated_at=timezone.now() - LONG_AGO)
    assert status_of(agent, thread)["run_status"] == "waiting_for_person"


def test_a_busy_agent_s_reads_do_not_write_each_time(thread: Thread, agent: APIClient) -> None:
    f.append(thread, f.user("hello"))
    context = f"/api/v1/threads/{thread.pk}/context/"
    assert agent.get(context).status_code == 200  # the first read is written
    with CaptureQueriesContext(connection) as queries:
        for _ in range(3):
            assert agent.get(context).status_code == 200
    table = Thread._meta.db_table
    updates = [q["sql"] for q in queries if q["sql"].startswith(f'UPDATE "{table}"')]
    assert updates == []


def test_the_list_filter_is_refused_for_an_unknown_status(agent: APIClient) -> None:
    answer = agent.get("/api/v1/threads/", {"run_status": "sleeping"})
    assert answer.status_code == 400


@pytest.mark.usefixtures("eager")
def test_an_imported_conversation_is_idle_not_running(
    agent: APIClient, workspace: Workspace, django_capture_on_commit_callbacks: Any
) -> None:
    Workspace.objects.filter(pk=workspace.pk).update(agents_may_import=True)
    report = imported(agent, TWO_CHATS, django_capture_on_commit_callbacks)
    assert report["counts"]["created"] == 2
    for line in report["report"]:
        thread = Thread.objects.get(pk=line["thread"])
        assert status_of(agent, thread)["run_status"] == "idle"
    assert listed(agent, "running") == []
