"""Pausing a thread's folds without a rollback, and resuming them, through the thread's PATCH
(docs/api.md, "Settings — `PATCH /api/v1/threads/{id}/`", docs/repairs.md, "Rollback"): while
paused, events that would fold the thread fold nothing and the agent's context keeps the summary it
had; resuming folds what the paused time held back. The title changes through the same PATCH."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests import factories as f
from tests.api.test_checkpoints_api import person, post
from tests.runtime.conftest import eager_tasks  # noqa: F401 (a fixture)
from threads.models import AuditEntry, Checkpoint, SummaryVersion, Thread

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("eager_tasks")]


def patch(client: APIClient, thread: Thread, body: Any) -> Any:
    return client.patch(
        f"/api/v1/threads/{thread.pk}/", data=json.dumps(body), content_type="application/json"
    )


def _refund(thread: Thread, n: int, capture: Any) -> None:
    """A side effect's result: the structural trigger folds the thread after it."""
    with capture(execute=True):
        f.append(
            thread,
            f.user(f"Refund order {n}"),
            f.call(f"r{n}", "refund", {"order": n}, side_effect_key=f"refund-{n}"),
            f.result(f"r{n}", "succeeded", {"refunded": True}),
            f.assistant("Done."),
        )
    thread.refresh_from_db()


@pytest.fixture
def folded(workspace: Any, django_capture_on_commit_callbacks: Any) -> Thread:
    thread = f.make_thread(workspace, external_id="pausable")
    _refund(thread, 1, django_capture_on_commit_callbacks)
    assert thread.covered_until == thread.last_seq  # the trigger folds an unpaused thread
    return thread


def test_a_paused_thread_folds_nothing_until_resumed(
    folded: Thread, workspace: Any, agent: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    capture = django_capture_on_commit_callbacks
    admin = person(workspace, "admin", "ada")
    head, versions = folded.head_version, SummaryVersion.objects.filter(thread=folded).count()

    paused = patch(admin, folded, {"folds_paused": True, "pause_reason": "summariser under review"})
    assert paused.status_code == 200, paused.content
    shown = agent.get(f"/api/v1/threads/{folded.pk}/").json()
    assert shown["folds_paused"] is True
    assert shown["paused_by"] == "ada" and shown["pause_reason"] == "summariser under review"

    _refund(folded, 2, capture)
    assert folded.head_version == head
    assert SummaryVersion.objects.filter(thread=folded).count() == versions
    refused = post(agent, f"/api/v1/threads/{folded.pk}/fold/")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "thread_pinned"
    context = agent.get(f"/api/v1/threads/{folded.pk}/context/").json()
    assert context["summary"]["version"] == head
    assert [e["seq"] for e in context["events"]] == list(
        range(folded.covered_until + 1, folded.last_seq + 1)
    )

    with capture(execute=True):
        resumed = patch(admin, folded, {"folds_paused": False, "pause_reason": "reviewed"})
    assert resumed.status_code == 200, resumed.content
    assert resumed.json()["folds_paused"] is False and resumed.json()["paused_by"] == ""
    folded.refresh_from_db()
    assert folded.head_version > head  # the fold the pause held back ran
    assert folded.covered_until == folded.last_seq
    pause = AuditEntry.objects.get(thread=folded, action="thread.pause")
    assert pause.after is not None and pause.after["pin_reason"] == "summariser under review"
    release = AuditEntry.objects.get(thread=folded, action="thread.unpin")
    assert release.before is not None and release.before["pinned_by"] == "ada"
    assert release.after == {"reason": "reviewed"}


def test_resuming_releases_a_rollbacks_pin(
    folded: Thread, workspace: Any, agent: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    capture = django_capture_on_commit_callbacks
    admin = person(workspace, "admin")
    checkpoint = Checkpoint.objects.get(thread=folded, summary_version__version=1)
    rollback = {"checkpoint": checkpoint.pk, "reason": "hold it", "pin": True}
    assert post(admin, f"/api/v1/threads/{folded.pk}/rollback/", rollback).status_code == 200
    folded.refresh_from_db()
    restored = folded.head_version
    _refund(folded, 2, capture)
    assert folded.head_version == restored

    with capture(execute=True):
        resumed = patch(admin, folded, {"folds_paused": False})
    assert resumed.status_code == 200, resumed.content
    folded.refresh_from_db()
    assert folded.pinned_at is None and folded.head_version > restored
    assert folded.covered_until == folded.last_seq


def test_pausing_needs_a_reason_and_changes_nothing_without_one(
    folded: Thread, workspace: Any
) -> None:
    admin = person(workspace, "admin")
    for body, field in [
        ({"folds_paused": True}, "pause_reason"),
        ({"folds_paused": True, "pause_reason": "   "}, "pause_reason"),
        ({"pause_reason": "why not"}, "pause_reason"),
        ({"folds_paused": "yes", "pause_reason": "x"}, "folds_paused"),
        ({"folds_paused": 1, "pause_reason": "x"}, "folds_paused"),
        ({"folds_paused": True, "pause_reason": "x", "high_watermark": 2}, "high_watermark"),
    ]:
        answer = patch(admin, folded, body)
        assert answer.status_code == 400, (body, answer.content)
        assert answer.json()["error"]["code"] == "validation_error"
        assert field in answer.json()["error"]["fields"], (body, answer.json())
    folded.refresh_from_db()
    assert folded.pinned_at is None and folded.high_watermark != 2
    assert not AuditEntry.objects.filter(thread=folded, action="thread.pause").exists()


@pytest.mark.parametrize("role", ["operator", "reviewer"])
def test_only_an_admin_pauses_folds_or_renames(
    folded: Thread, workspace: Any, agent: APIClient, role: str
) -> None:
    body = {"folds_paused": True, "pause_reason": "x", "title": "renamed"}
    assert patch(agent, folded, body).status_code == 403
    assert patch(person(workspace, role), folded, body).status_code == 403
    folded.refresh_from_db()
    assert folded.pinned_at is None and folded.title != "renamed"


def test_a_title_changes_through_the_patch_and_is_audited(folded: Thread, workspace: Any) -> None:
    admin = person(workspace, "admin")
    before = folded.title
    answer = patch(admin, folded, {"title": "Refunds for order 1"})
    assert answer.status_code == 200 and answer.json()["title"] == "Refunds for order 1"
    folded.refresh_from_db()
    assert folded.title == "Refunds for order 1"
    entry = AuditEntry.objects.get(thread=folded, action="thread.settings")
    assert entry.before == {"title": before} and entry.after == {"title": "Refunds for order 1"}
    assert patch(admin, folded, {"title": "x" * 301}).status_code == 400
    folded.refresh_from_db()
    assert folded.title == "Refunds for order 1"


def test_pausing_a_paused_thread_keeps_its_pin(folded: Thread, workspace: Any) -> None:
    first = person(workspace, "admin", "ada")
    assert patch(first, folded, {"folds_paused": True, "pause_reason": "first"}).status_code == 200
    again = patch(
        person(workspace, "admin", "bob"), folded, {"folds_paused": True, "pause_reason": "second"}
    )
    assert again.status_code == 200
    assert again.json()["paused_by"] == "ada" and again.json()["pause_reason"] == "first"
    assert AuditEntry.objects.filter(thread=folded, action="thread.pause").count() == 1
