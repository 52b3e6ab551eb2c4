"""Authentication failures and workspace isolation on every route of threads, events and tasks."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tests import factories
from tests.api.conftest import log_state
from threads.models import ApiKey, TaskRun
from threads.services.tasks import task_run_start
from threads.services.workspaces import api_key_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(workspace: Any, thread: Any) -> TaskRun:
    return task_run_start(workspace=workspace, thread=thread, kind="fold", send=lambda _id: None)


def _routes(thread: Any, task: TaskRun) -> list[tuple[str, str]]:
    return [
        ("get", "/api/v1/threads/"),
        ("get", f"/api/v1/threads/{thread.id}/"),
        ("get", f"/api/v1/threads/{thread.id}/events/"),
        ("post", f"/api/v1/threads/{thread.id}/events/"),
        ("post", "/api/v1/threads/"),
        ("get", f"/api/v1/tasks/{task.id}/"),
    ]


def _call(client: APIClient, method: str, url: str) -> Any:
    if method == "post":
        body = {"kind": "message", "role": "user", "content": "x"}
        if url.endswith("/threads/"):
            body = {"external_id": "new-thread"}
        return client.post(url, data=json.dumps(body), content_type="application/json")
    return client.get(url)


@pytest.mark.parametrize(
    "header, code",
    [
        (None, "not_authenticated"),
        ("Bearer ctx_not-a-key", "authentication_failed"),
        ("Bearer ", "authentication_failed"),
        ("Token ctx_whatever", "authentication_failed"),
        ("Basic dXNlcjpwYXNz", "authentication_failed"),
    ],
)
def test_auth_failures_are_401_json(thread, task, header, code):
    client = APIClient()
    if header is not None:
        client.credentials(HTTP_AUTHORIZATION=header)
    before = log_state(thread)
    for method, url in _routes(thread, task):
        response = _call(client, method, url)
        assert response.status_code == 401, (method, url, response.content)
        assert response.json()["error"]["code"] == code
        assert response["WWW-Authenticate"] == "Bearer"
    assert log_state(thread) == before


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer"])
def test_the_scheme_is_any_case(workspace, thread, scheme):
    secret = api_key_create(workspace=workspace, name="ci")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {secret}")
    assert client.get(f"/api/v1/threads/{thread.id}/").status_code == 200


def test_a_revoked_key_is_401(workspace, thread, task):
    secret = api_key_create(workspace=workspace, name="ci")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get(f"/api/v1/threads/{thread.id}/").status_code == 200
    ApiKey.objects.filter(name="ci").update(revoked_at=timezone.now())
    for method, url in _routes(thread, task):
        response = _call(client, method, url)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "authentication_failed"


def test_another_workspaces_agent_gets_404_everywhere(other_agent, thread, task):
    factories.append(thread, factories.user("private"))
    before = log_state(thread)
    for url in (
        f"/api/v1/threads/{thread.id}/",
        f"/api/v1/threads/{thread.external_id}/",
        f"/api/v1/threads/{thread.id}/events/",
        f"/api/v1/threads/{thread.external_id}/events/",
        f"/api/v1/tasks/{task.id}/",
    ):
        response = other_agent.get(url)
        assert response.status_code == 404, url
        assert response.json()["error"]["code"] == "not_found"
    for url in (
        f"/api/v1/threads/{thread.id}/events/",
        f"/api/v1/threads/{thread.external_id}/events/",
    ):
        response = other_agent.post(
            url, data=json.dumps(factories.user("intrusion")), content_type="application/json"
        )
        assert response.status_code == 404
    assert other_agent.get("/api/v1/threads/").json()["count"] == 0
    assert other_agent.get("/api/v1/threads/", {"q": thread.external_id}).json()["results"] == []
    assert log_state(thread) == before


def test_same_external_id_in_two_workspaces_are_two_threads(agent, other_agent, thread):
    created = other_agent.post(
        "/api/v1/threads/",
        data=json.dumps({"external_id": thread.external_id}),
        content_type="application/json",
    )
    assert created.status_code == 201
    assert created.json()["id"] != str(thread.id)
    other_agent.post(
        f"/api/v1/threads/{thread.external_id}/events/",
        data=json.dumps(factories.user("theirs")),
        content_type="application/json",
    )
    assert agent.get(f"/api/v1/threads/{thread.external_id}/events/").json()["events"] == []


def test_people_see_threads_and_tasks_of_their_workspaces_only(operator_client, thread, task):
    other_workspace, _ = factories.make_workspace("globex")
    foreign = factories.make_thread(other_workspace, external_id="foreign")
    foreign_task = task_run_start(
        workspace=other_workspace, thread=foreign, kind="fold", send=lambda _id: None
    )
    assert operator_client.get(f"/api/v1/threads/{thread.external_id}/").status_code == 200
    assert operator_client.get(f"/api/v1/tasks/{task.id}/").status_code == 200
    listed = operator_client.get("/api/v1/threads/").json()
    assert [t["id"] for t in listed["results"]] == [str(thread.id)]
    for url in (
        f"/api/v1/threads/{foreign.id}/",
        f"/api/v1/threads/{foreign.id}/events/",
        f"/api/v1/tasks/{foreign_task.id}/",
    ):
        assert operator_client.get(url).status_code == 404, url
    token = "c" * 32  # an unmasked CSRF secret, the same in cookie and header
    operator_client.cookies["csrftoken"] = token
    response = operator_client.post(
        f"/api/v1/threads/{foreign.id}/events/",
        data=json.dumps(factories.user("x")),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=token,
    )
    assert response.status_code == 404


def test_a_logged_out_person_is_401(client, thread):
    response = client.get(f"/api/v1/threads/{thread.id}/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
