"""Every error under /api/ is JSON in the contract's shape, for every method, with or without
a session (docs/api.md §1.3): an unsafe request to an unknown path is a JSON 404, not
Django's HTML CSRF page, and a CSRF failure under /api/ is a JSON 403."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.test import Client, RequestFactory
from django.utils.module_loading import import_string
from rest_framework.test import APIClient

from tests import factories as f

pytestmark = pytest.mark.django_db

METHODS = ["post", "put", "patch", "delete"]


def _assert_json_404(answer: Any) -> None:
    assert answer.status_code == 404, answer.content[:200]
    assert answer["Content-Type"].startswith("application/json")
    assert answer.json()["error"]["code"] == "not_found"
    assert set(answer.json()["error"]) == {"code", "message", "fields"}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("path", ["/api/v1/nope/", "/api/nope", "/api/v1/threads/x/nope/"])
def test_unsafe_request_to_an_unknown_api_path_without_a_session(method: str, path: str) -> None:
    client = Client(enforce_csrf_checks=True)
    _assert_json_404(getattr(client, method)(path, data="{}", content_type="application/json"))


@pytest.mark.parametrize("method", METHODS)
def test_unsafe_request_to_an_unknown_api_path_with_a_session(workspace: Any, method: str) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(f.make_person(workspace, "ops", "operator"))
    answer = getattr(client, method)("/api/v1/nope/", data="{}", content_type="application/json")
    _assert_json_404(answer)


@pytest.mark.parametrize("method", METHODS)
def test_unsafe_request_to_an_unknown_api_path_with_a_key(agent: APIClient, method: str) -> None:
    _assert_json_404(getattr(agent, method)("/api/v1/nope/", {}, format="json"))


def test_a_csrf_failure_under_api_answers_the_contract_shape() -> None:
    failure = import_string(settings.CSRF_FAILURE_VIEW)
    request = RequestFactory().post("/api/v1/threads/x/rollback/")
    answer = failure(request, reason="CSRF cookie not set.")
    assert answer.status_code == 403
    assert answer["Content-Type"].startswith("application/json")
    error = __import__("json").loads(answer.content)["error"]
    assert error["code"] == "permission_denied" and "CSRF" in error["message"]
    assert error["fields"] == {}


def test_a_csrf_failure_elsewhere_is_the_normal_page() -> None:
    client = Client(enforce_csrf_checks=True)
    answer = client.post("/accounts/login/", {"username": "x", "password": "y"})
    assert answer.status_code == 403
    assert answer["Content-Type"].startswith("text/html")
