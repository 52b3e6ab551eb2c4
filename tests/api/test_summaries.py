"""POST .../fold/, GET .../summaries/ and .../summaries/{version}/ (docs/api.md,
"Summaries and folding")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.middleware.csrf import _get_new_csrf_string
from rest_framework.test import APIClient

from ctxadmin.celery import app as celery_app
from tests import factories as f
from threads.models import AuditEntry, SummaryPhase, TaskRun, Thread
from threads.services import fold_preparation

pytestmark = pytest.mark.django_db

FIELDS = {
    "version",
    "phase",
    "covered_from",
    "covered_until",
    "trigger",
    "backend",
    "checksum",
    "content",
    "rendered",
    "tokens",
    "tokens_replaced",
    "verification",
}


@pytest.fixture
def eager() -> Iterator[None]:
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = before


def _conversation(thread: Thread) -> None:
    f.append(
        thread,
        f.user("where is my order?"),
        f.call("c1", "lookup", {"order": 1}),
        f.result(
            "c1",
            value={"status": "shipped"},
            verified_facts=[{"key": "order_status", "value": "shipped"}],
        ),
        f.assistant("It shipped."),
    )


def _fold(client: APIClient, thread: Thread, capture: Any, **extra: Any) -> Any:
    with capture(execute=True):
        response = client.post(f"/api/v1/threads/{thread.pk}/fold/", **extra)
    return response


def test_agent_folds_and_reads_the_version(
    agent: APIClient, thread: Thread, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    _conversation(thread)
    response = _fold(agent, thread, django_capture_on_commit_callbacks)
    assert response.status_code == 202
    task_id = response.json()["task_id"]
    run = TaskRun.objects.get(pk=task_id)
    assert run.kind == "fold" and run.state == "SUCCESS"
    listed = agent.get(f"/api/v1/threads/{thread.external_id}/summaries/").json()
    assert len(listed) == 1 and FIELDS <= set(listed[0])
    version = listed[0]
    assert version["phase"] == "committed" and version["backend"] == "structured"
    assert (version["covered_from"], version["covered_until"]) == (1, 4)
    assert version["trigger"]["kind"] == "manual"
    assert version["verification"]["ok"] is True
    assert all({"name", "ok", "detail"} == set(c) for c in version["verification"]["checks"])
    assert version["tokens"] > 0 and version["tokens_replaced"] > 0
    detail = agent.get(f"/api/v1/threads/{thread.pk}/summaries/{version['version']}/").json()
    assert detail == version
    assert AuditEntry.objects.filter(thread=thread, action="fold_requested").exists()


def test_fold_with_nothing_to_fold_is_a_successful_noop(
    agent: APIClient, thread: Thread, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    response = _fold(agent, thread, django_capture_on_commit_callbacks)
    assert response.status_code == 202
    run = TaskRun.objects.get(pk=response.json()["task_id"])
    assert run.state == "SUCCESS" and run.result is not None
    assert run.result["folded"] is False
    assert agent.get(f"/api/v1/threads/{thread.pk}/summaries/").json() == []


def test_people_fold_with_csrf(
    workspace: Any, thread: Thread, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    _conversation(thread)
    person = f.make_person(workspace, "olga", "operator")
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(person)
    refused = client.post(f"/api/v1/threads/{thread.pk}/fold/")
    assert refused.status_code == 403
    token = _get_new_csrf_string()
    client.cookies["csrftoken"] = token
    response = _fold(client, thread, django_capture_on_commit_callbacks, HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 202
    thread.refresh_from_db()
    assert thread.head_version == 1
    entry = AuditEntry.objects.get(thread=thread, action="fold_requested")
    assert entry.actor == person


def test_prepared_and_rejected_versions_are_listed(agent: APIClient, thread: Thread) -> None:
    _conversation(thread)
    prepared = fold_preparation.fold_prepare(
        thread_id=thread.pk, trigger={"kind": "manual", "reason": "t"}
    )
    assert prepared is not None
    listed = agent.get(f"/api/v1/threads/{thread.pk}/summaries/").json()
    assert listed[0]["phase"] == SummaryPhase.PREPARED
    assert listed[0]["verification"] == {"ok": None, "checks": []}


def test_unknown_version_and_other_workspace_are_404(
    agent: APIClient, other_agent: APIClient, thread: Thread
) -> None:
    assert agent.get(f"/api/v1/threads/{thread.pk}/summaries/7/").status_code == 404
    assert other_agent.get(f"/api/v1/threads/{thread.pk}/summaries/").status_code == 404
    assert other_agent.post(f"/api/v1/threads/{thread.pk}/fold/").status_code == 404
