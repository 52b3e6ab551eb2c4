"""One rule for external ids, for create and fork: each one must name a reachable thread, so
`{id}` in a thread URL (one path segment) can find it (docs/api.md,
"Create — `POST /api/v1/threads/` (agents)")."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests import factories as f
from tests.api.test_checkpoints_api import person, post, url
from tests.services.test_checkpoints import two_versions
from threads.models import Thread

pytestmark = pytest.mark.django_db

UNREACHABLE = ["a/b", "/", "..", ".", "  ", "x" * 201]


@pytest.mark.parametrize("external_id", UNREACHABLE)
def test_create_refuses_an_unreachable_external_id(agent: APIClient, external_id: str) -> None:
    answer = post(agent, "/api/v1/threads/", {"external_id": external_id})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "validation_error" and "external_id" in error["fields"]
    assert not Thread.objects.exists()


@pytest.mark.parametrize("external_id", UNREACHABLE)
def test_fork_over_the_api_refuses_what_create_refuses(
    thread: Thread, workspace: Any, external_id: str
) -> None:
    _, cp2 = two_versions(thread)
    body = {"checkpoint": cp2.pk, "external_id": external_id}
    answer = post(person(workspace, "reviewer"), url(thread, "fork/"), body)
    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert error["code"] == "validation_error" and "external_id" in error["fields"]
    assert Thread.objects.filter(workspace=workspace).count() == 1


def test_fork_from_the_dashboard_refuses_a_slash(thread: Thread, workspace: Any) -> None:
    _, cp2 = two_versions(thread)
    client = Client()
    client.force_login(f.make_person(workspace, "rita", "reviewer"))
    answer = client.post(
        f"/threads/{thread.pk}/fork/", {"checkpoint": cp2.pk, "external_id": "order/retry"}
    )
    assert answer.status_code == 400
    assert "/" in answer.content.decode()
    assert Thread.objects.filter(workspace=workspace).count() == 1


def test_a_fork_with_a_good_external_id_is_reachable_by_it(thread: Thread, workspace: Any) -> None:
    _, cp2 = two_versions(thread)
    client = person(workspace, "reviewer")
    answer = post(client, url(thread, "fork/"), {"checkpoint": cp2.pk, "external_id": "retry-1"})
    assert answer.status_code == 201
    assert client.get("/api/v1/threads/retry-1/").json()["id"] == answer.json()["id"]


SPELLINGS = [str, lambda u: str(u).upper(), lambda u: u.hex]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_an_external_id_that_is_another_threads_id_is_refused(
    agent: APIClient, thread: Thread, spelling: Any
) -> None:
    """`{id}` resolves a UUID to the thread with that id first: a thread named by another's id
    could never be reached by its name, and appends meant for it would land in the other."""
    taken = spelling(thread.id)
    answer = post(agent, "/api/v1/threads/", {"external_id": taken})
    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert error["code"] == "validation_error"
    assert "another thread" in error["fields"]["external_id"]
    assert list(Thread.objects.values_list("pk", flat=True)) == [thread.pk]
    body = {"kind": "message", "role": "user", "content": "for the thread with that id"}
    assert post(agent, f"/api/v1/threads/{taken}/events/", body).status_code == 201
    thread.refresh_from_db()
    assert thread.last_seq == 1
    # Any other UUID is a name like any other (LangGraph's thread ids often are UUIDs).
    assert post(agent, "/api/v1/threads/", {"external_id": str(uuid.uuid4())}).status_code == 201


def test_a_fork_named_by_another_threads_id_is_refused(thread: Thread, workspace: Any) -> None:
    _, cp2 = two_versions(thread)
    body = {"checkpoint": cp2.pk, "external_id": str(thread.id)}
    answer = post(person(workspace, "reviewer"), url(thread, "fork/"), body)
    assert answer.status_code == 400, answer.content
    assert "another thread" in answer.json()["error"]["fields"]["external_id"]
    assert Thread.objects.filter(workspace=workspace).count() == 1


def test_another_workspaces_thread_id_is_a_name_like_any_other(
    agent: APIClient, workspace: Any
) -> None:
    other, _ = f.make_workspace("elsewhere")
    elsewhere = f.make_thread(other, external_id="theirs")
    answer = post(agent, "/api/v1/threads/", {"external_id": str(elsewhere.id)})
    assert answer.status_code == 201, answer.content
    assert agent.get(f"/api/v1/threads/{elsewhere.id}/").json()["id"] == answer.json()["id"]
