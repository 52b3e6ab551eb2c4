"""Cache-Control: a signed-in person's pages and every API answer are `private, no-cache`
(one caller's workspace data: no shared cache keeps it, no browser shows it again unchecked);
an answer that already says how it may be cached keeps its header; static files and /metrics
are left alone."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils.cache import get_max_age

from tests.views.conftest import login

pytestmark = pytest.mark.django_db


def _directives(response: Any) -> set[str]:
    return {part.strip() for part in response.get("Cache-Control", "").split(",") if part}


@pytest.mark.parametrize(
    "path", ["/threads/", "/threads/order-10086/", "/keys/", "/forget/", "/audit/"]
)
def test_a_signed_in_page_is_private_no_cache(story: Any, workspace: Any, path: str) -> None:
    response = login(workspace, "admin").get(path)
    assert response.status_code == 200
    assert {"private", "no-cache"} <= _directives(response)


def test_an_htmx_region_is_private_no_cache(story: Any, operator: Client) -> None:
    response = operator.get("/threads/", HTTP_HX_REQUEST="true")
    assert {"private", "no-cache"} <= _directives(response)


@pytest.mark.parametrize("path", ["/api/v1/threads/", "/api/v1/threads/nosuch/", "/api/v1/x/"])
def test_api_answers_are_private_no_cache(agent: Any, thread: Any, path: str) -> None:
    assert {"private", "no-cache"} <= _directives(agent.get(path))


def test_an_anonymous_api_refusal_is_private_no_cache(client: Client) -> None:
    response = client.get("/api/v1/threads/")
    assert response.status_code in (401, 403)
    assert {"private", "no-cache"} <= _directives(response)


def test_a_new_key_answer_keeps_no_store(admin: Client, workspace: Any) -> None:
    response = admin.post("/keys/new/", {"workspace": workspace.pk, "name": "ci", "expires": ""})
    assert response.status_code == 201
    assert response["Cache-Control"] == "no-store"


def test_the_sign_in_page_keeps_djangos_never_cache(client: Client) -> None:
    response = client.get("/accounts/login/")
    assert "no-store" in _directives(response)


def test_metrics_is_left_alone(workspace: Any) -> None:
    client = login(workspace, "operator")
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    assert not response.has_header("Cache-Control")


def test_static_files_keep_whitenoise_headers(settings: Any, workspace: Any) -> None:
    settings.WHITENOISE_USE_FINDERS = True
    settings.WHITENOISE_AUTOREFRESH = True
    client = login(workspace, "operator")  # a new client: its middleware reads the settings
    response = client.get("/static/ctxadmin/app.css")
    assert response.status_code == 200
    assert "private" not in _directives(response)
    assert get_max_age(response) is not None


def test_a_signed_in_persons_404_is_private_and_an_anonymous_one_is_not(workspace: Any) -> None:
    client = login(workspace, "operator")
    response = client.get("/nowhere/")
    assert response.status_code == 404
    assert {"private", "no-cache"} <= _directives(response)
    assert "private" not in _directives(Client().get("/nowhere/"))
