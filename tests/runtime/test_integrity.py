"""Verify task, integrity sweep and their API: POST /verify/ → 202, GET /integrity/."""

from __future__ import annotations

from typing import Any

import pytest
from django.middleware.csrf import _get_new_csrf_string
from rest_framework.test import APIClient

from tests import factories
from tests.factories import tamper
from threads.models import AuditEntry, Checkpoint, Event, TaskRun, TaskState, Thread
from threads.services.integrity import checkpoint_checksum
from threads.tasks import integrity_sweep_task, verify_thread_task

pytestmark = pytest.mark.django_db


def fill(thread: Thread, units: int = 3) -> list[Event]:
    """A few interaction units: a user asks, the agent calls a tool and answers."""
    bodies: list[dict[str, Any]] = []
    for i in range(units):
        bodies += [
            factories.user(f"where is order {i}?"),
            factories.call(f"c{i}", "lookup_order", {"order": i}),
            factories.result(f"c{i}", value={"order": i, "status": "shipped"}),
            factories.assistant(f"order {i} has shipped"),
        ]
    return factories.append(thread, *bodies)


def checkpoint_at(thread: Thread, cursor: int, label: str) -> Checkpoint:
    checkpoint = Checkpoint(
        thread=thread,
        cursor=cursor,
        label=label,
        chain_hash=Event.objects.get(thread=thread, seq=cursor).hash,
    )
    checkpoint.checksum = checkpoint_checksum(checkpoint)
    checkpoint.save()
    return checkpoint


def verify(
    client: APIClient, thread: Thread, django_capture_on_commit_callbacks: Any, **headers: Any
) -> TaskRun:
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/api/v1/threads/{thread.pk}/verify/", **headers)
    assert response.status_code == 202, response.content
    return TaskRun.objects.get(pk=response.json()["task_id"])


def test_agent_verifies_a_thread_and_reads_the_verdict(
    agent: APIClient, thread: Thread, eager_tasks: None, django_capture_on_commit_callbacks: Any
) -> None:
    events = fill(thread)
    run = verify(agent, thread, django_capture_on_commit_callbacks)
    assert run.kind == "verify" and run.thread_id == thread.pk
    assert run.state == TaskState.SUCCESS
    assert run.done == run.total == len(events)
    assert isinstance(run.result, dict)
    assert run.result["chain_ok"] is True
    assert run.result["verified_until"] == len(events)

    task = agent.get(f"/api/v1/tasks/{run.pk}/")
    if task.status_code == 200:  # the task endpoint belongs to the threads API
        assert task.json()["state"] == "SUCCESS"
    answer = agent.get(f"/api/v1/threads/{thread.external_id}/integrity/").json()
    assert answer == {**run.result, "verified_at": answer["verified_at"]}
    assert answer["first_bad_seq"] is None and answer["last_safe_checkpoint"] is None
    assert AuditEntry.objects.filter(action="verify_requested", thread=thread).count() == 1


def test_a_tampered_event_is_named_and_later_checkpoints_become_unsafe(
    agent: APIClient, thread: Thread, eager_tasks: None, django_capture_on_commit_callbacks: Any
) -> None:
    events = fill(thread, units=4)
    early = checkpoint_at(thread, 4, "before")
    late = checkpoint_at(thread, 12, "after")
    tamper(events[6], result={"order": 1, "status": "refunded"})  # seq 7

    run = verify(agent, thread, django_capture_on_commit_callbacks)
    assert run.state == TaskState.SUCCESS
    answer = agent.get(f"/api/v1/threads/{thread.pk}/integrity/").json()
    assert answer["chain_ok"] is False
    assert answer["first_bad_seq"] == 7
    assert answer["verified_until"] == 6
    assert answer["last_safe_checkpoint"]["id"] == early.pk
    assert answer["last_safe_checkpoint"]["cursor"] == 4
    late.refresh_from_db()
    assert late.safe is False and "seq 7" in late.unsafe_reason


def test_people_of_every_role_may_verify_with_csrf(
    workspace: Any, thread: Thread, eager_tasks: None, django_capture_on_commit_callbacks: Any
) -> None:
    fill(thread, units=1)
    user = factories.make_person(workspace, "olga", "operator")
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    refused = client.post(f"/api/v1/threads/{thread.pk}/verify/")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "permission_denied"

    token = _get_new_csrf_string()
    client.cookies["csrftoken"] = token
    run = verify(client, thread, django_capture_on_commit_callbacks, HTTP_X_CSRFTOKEN=token)
    assert run.state == TaskState.SUCCESS
    audit = AuditEntry.objects.get(action="verify_requested", thread=thread)
    assert audit.actor_id == user.pk and audit.actor_label == "olga"
    assert client.get(f"/api/v1/threads/{thread.pk}/integrity/").status_code == 200


def test_other_workspaces_and_strangers_get_404(
    other_agent: APIClient, thread: Thread, workspace: Any, api_key: str
) -> None:
    fill(thread, units=1)
    stranger = factories.make_person(factories.make_workspace("initech")[0], "sam", "admin")
    person = APIClient()
    person.force_login(stranger)
    for client in (other_agent, person):
        assert client.post(f"/api/v1/threads/{thread.pk}/verify/").status_code == 404
        response = client.get(f"/api/v1/threads/{thread.pk}/integrity/")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert APIClient().get(f"/api/v1/threads/{thread.pk}/integrity/").status_code in (401, 403)
    assert not TaskRun.objects.exists()


def test_verify_task_records_failure_for_a_missing_thread(workspace: Any) -> None:
    run = TaskRun.objects.create(id="t-missing", workspace=workspace, kind="verify")
    with pytest.raises(Thread.DoesNotExist):
        verify_thread_task.apply(
            ("00000000-0000-0000-0000-000000000000",), task_id=run.pk, throw=True
        )
    run.refresh_from_db()
    assert run.state == TaskState.FAILURE
    assert isinstance(run.result, dict) and "DoesNotExist" in run.result["error"]


def test_sweep_checks_every_thread_incrementally(workspace: Any, eager_tasks: None) -> None:
    good = factories.make_thread(workspace, "good")
    bad = factories.make_thread(workspace, "bad")
    fill(good, units=2)
    bad_events = fill(bad, units=2)
    tamper(bad_events[2], status="failed")
    broken = [{"thread": str(bad.pk), "first_bad_seq": 3}]
    assert integrity_sweep_task() == {"checked": 2, "broken": broken}
    good.refresh_from_db()
    assert (good.verified_until, good.verified_hash) == (8, good.chain_head)

    # The next sweep reads only what was appended since: seq 9..12 of the good thread. A row
    # changed below verified_until is left to the full verify, which reads from genesis.
    good_events = fill(good, units=1)
    tamper(Event.objects.get(thread=good, seq=2), content="something else")
    assert integrity_sweep_task() == {"checked": 2, "broken": broken}
    good.refresh_from_db()
    assert (good.verified_until, good.verified_hash) == (12, good_events[-1].hash)
    assert good.chain_ok

    verify_thread_task.apply((str(good.pk),), throw=True)
    good.refresh_from_db()
    assert (good.chain_ok, good.first_bad_seq) == (False, 2)
