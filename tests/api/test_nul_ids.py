"""A NUL (or another character PostgreSQL cannot store in text) in a path id or a query:
a 404 in the error shape on the API, a 404 page or an empty search on the dashboard, never
a 500 (PostgreSQL refuses NUL in a text parameter with a DataError)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests import factories
from tests.api.test_checkpoints_api import with_csrf
from tests.views.conftest import login

pytestmark = pytest.mark.django_db

BAD = ["a%00b", "%00", "a%00"]

API_GETS = [
    "/api/v1/threads/{bad}/",
    "/api/v1/threads/{bad}/events/",
    "/api/v1/threads/{bad}/tools/",
    "/api/v1/threads/{bad}/context/",
    "/api/v1/threads/{bad}/summaries/",
    "/api/v1/threads/{bad}/summaries/1/",
    "/api/v1/threads/{bad}/checkpoints/",
    "/api/v1/threads/{bad}/integrity/",
    "/api/v1/threads/{bad}/approvals/",
    "/api/v1/threads/{bad}/langgraph/checkpoints/latest/",
    "/api/v1/threads/{thread}/langgraph/checkpoints/{bad}/",
    "/api/v1/tasks/{bad}/",
    "/api/v1/imports/{bad}/",
]

API_POSTS = [
    "/api/v1/threads/{bad}/events/",
    "/api/v1/threads/{bad}/fold/",
    "/api/v1/threads/{bad}/verify/",
    "/api/v1/threads/{bad}/langgraph/writes/",
    "/api/v1/threads/{bad}/langgraph/copy/",
]
# Only people may take a checkpoint, roll back or fork.
PERSON_POSTS = [
    "/api/v1/threads/{bad}/checkpoints/",
    "/api/v1/threads/{bad}/rollback/",
    "/api/v1/threads/{bad}/fork/",
]


def _assert_not_found(response: Any) -> None:
    assert response.status_code in (400, 404), (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] in ("not_found", "validation_error")
    assert isinstance(error["message"], str)
    assert isinstance(error["fields"], dict)


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("path", API_GETS)
def test_a_nul_in_an_api_path_id_is_not_found(agent: Any, thread: Any, path: str, bad: str) -> None:
    _assert_not_found(agent.get(path.format(bad=bad, thread=thread.id)))


@pytest.mark.parametrize("path", API_POSTS)
def test_a_nul_in_an_api_path_id_is_not_found_on_writes(agent: Any, thread: Any, path: str) -> None:
    response = agent.post(path.format(bad="a%00b"), data=b"{}", content_type="application/json")
    _assert_not_found(response)


@pytest.mark.parametrize("path", PERSON_POSTS)
def test_a_nul_in_a_person_write_path_id_is_not_found(operator_client: Any, path: str) -> None:
    response = with_csrf(operator_client).post(
        path.format(bad="a%00b"), data=b"{}", content_type="application/json"
    )
    _assert_not_found(response)


def test_a_nul_in_a_person_api_path_id_is_not_found(operator_client: Any) -> None:
    _assert_not_found(operator_client.get("/api/v1/threads/a%00b/"))
    _assert_not_found(operator_client.get("/api/v1/tasks/a%00b/"))


def test_a_nul_in_a_langgraph_thread_id_lists_nothing(agent: Any) -> None:
    response = agent.get("/api/v1/threads/a%00b/langgraph/checkpoints/")
    assert response.status_code == 200, response.content[:300]
    assert response.json()["checkpoints"] == []


def test_a_langgraph_put_to_a_nul_thread_id_is_refused(agent: Any) -> None:
    body = {"checkpoint_id": "1", "checkpoint": {"v": 1, "id": "1", "channel_versions": {}}}
    response = agent.post(
        "/api/v1/threads/a%00b/langgraph/checkpoints/",
        data=json.dumps(body),
        content_type="application/json",
    )
    _assert_not_found(response)
    assert "external_id" in response.json()["error"]["fields"]


def test_a_nul_in_the_search_query_is_harmless(agent: Any, thread: Any) -> None:
    response = agent.get("/api/v1/search/?q=%00")
    assert response.status_code < 500, response.content[:300]
    response = agent.get("/api/v1/threads/?q=a%00b")
    assert response.status_code < 500, response.content[:300]


DASHBOARD_GETS = [
    "/threads/{bad}/",
    "/threads/{bad}/events/1/",
    "/threads/{bad}/events/1/body/",
    "/threads/{bad}/context/",
    "/threads/{bad}/summaries/",
    "/threads/{bad}/summaries/1/",
    "/threads/{bad}/checkpoints/",
    "/tasks/{bad}/progress/",
    "/imports/{bad}/",
]


@pytest.mark.parametrize("path", DASHBOARD_GETS)
def test_a_nul_in_a_dashboard_path_id_is_the_404_page(workspace: Any, path: str) -> None:
    client = login(workspace, "operator")
    response = client.get(path.format(bad="a%00b"))
    assert response.status_code == 404, (response.status_code, response.content[:300])


@pytest.mark.parametrize("query", ["?q=%00", "?q=a%00b", "?q=%00&sort=title"])
def test_a_nul_in_the_thread_list_search_is_an_empty_search(workspace: Any, query: str) -> None:
    factories.make_thread(workspace, external_id="order-1")
    client = login(workspace, "operator")
    response = client.get("/threads/" + query)
    assert response.status_code == 200, response.content[:300]
    assert b"order-1" not in response.content
