"""Every error under /api/ is JSON in the contract's shape, for every method, with or without
a session (docs/api.md, "Error shape"): an unsafe request to an unknown path is a JSON 404, not
Django's HTML CSRF page, and a CSRF failure under /api/ is a JSON 403."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.db import OperationalError
from django.middleware.csrf import REASON_NO_REFERER
from django.test import Client, RequestFactory
from django.utils.module_loading import import_string
from rest_framework.test import APIClient

from tests import factories as f
from threads import selectors
from threads.api import errors
from threads.views import metrics as metrics_view

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


def test_a_dashboard_500_is_the_product_page(workspace: Any, monkeypatch: Any) -> None:
    def broken(**kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(selectors, "threads_in", broken)
    client = Client(raise_request_exception=False)
    client.force_login(f.make_person(workspace, "ops", "operator"))
    answer = client.get("/threads/")
    assert answer.status_code == 500
    assert answer["Content-Type"].startswith("text/html")
    assert b"Server error." in answer.content and b"ctxadmin" in answer.content


def test_the_500_page_reads_nothing_from_the_database(django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(0):
        answer = errors.handler500(RequestFactory().get("/threads/"))
    assert answer.status_code == 500 and b"Server error." in answer.content


def test_the_500_page_falls_back_to_text_when_it_cannot_render(monkeypatch: Any) -> None:
    def broken(request: Any) -> Any:
        raise ValueError("Missing staticfiles manifest entry")

    monkeypatch.setattr(errors, "server_error", broken)
    answer = errors.handler500(RequestFactory().get("/threads/"))
    assert answer.status_code == 500
    assert answer["Content-Type"].startswith("text/plain")


@pytest.mark.parametrize("path", ["/api/v1/threads/", "/api/v1/nope/", "/api/schema/"])
def test_a_disallowed_host_under_api_is_a_json_400(path: str) -> None:
    answer = Client().get(path, HTTP_HOST="evil.example")
    assert answer.status_code == 400, answer.content[:200]
    assert answer["Content-Type"].startswith("application/json")
    assert answer.json()["error"]["code"] == "bad_request"
    assert set(answer.json()["error"]) == {"code", "message", "fields"}


def test_a_disallowed_host_on_the_dashboard_is_the_product_page() -> None:
    answer = Client().get("/threads/", HTTP_HOST="evil.example")
    assert answer.status_code == 400
    assert answer["Content-Type"].startswith("text/html")
    assert b"Bad request." in answer.content and b"ctxadmin" in answer.content


def test_a_csrf_failure_on_the_dashboard_is_the_product_page_with_the_reason() -> None:
    client = Client(enforce_csrf_checks=True)
    answer = client.post("/accounts/login/", {"username": "x", "password": "y"})
    assert answer.status_code == 403
    page = answer.content.decode()
    assert "ctxadmin" in page and "Nothing was done." in page
    assert "CSRF cookie not set" in page and "allow them for this site" in page


def test_a_csrf_failure_without_a_referer_says_so() -> None:
    failure = import_string(settings.CSRF_FAILURE_VIEW)
    answer = failure(RequestFactory().post("/threads/x/fold/"), reason=REASON_NO_REFERER)
    assert answer.status_code == 403
    assert b"Referer header" in answer.content


@pytest.mark.django_db(transaction=True)
def test_metrics_with_the_database_down_is_plain_text(monkeypatch: Any) -> None:
    def down() -> Any:
        raise OperationalError("database is locked")

    monkeypatch.setattr(metrics_view.figures, "metric_totals", down)
    answer = Client(REMOTE_ADDR="127.0.0.1").get("/metrics")
    assert answer.status_code == 503
    assert answer["Content-Type"].startswith("text/plain")
    assert answer["Retry-After"]
    assert b"<" not in answer.content


def test_metrics_500_and_405_are_plain_text(monkeypatch: Any) -> None:
    def broken() -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(metrics_view.figures, "metric_totals", broken)
    client = Client(REMOTE_ADDR="127.0.0.1", raise_request_exception=False)
    answer = client.get("/metrics")
    assert answer.status_code == 500
    assert answer["Content-Type"].startswith("text/plain")
    answer = client.post("/metrics")
    assert answer.status_code == 405
    assert answer["Content-Type"].startswith("text/plain")


@pytest.mark.parametrize("debug", [True, False])
def test_a_page_not_found_is_the_products_page_with_or_without_debug(
    workspace: Any, settings: Any, debug: bool
) -> None:
    """The demo runs with DEBUG on: its 404 must not be Django's page listing the URLconf."""
    settings.DEBUG = debug
    client = Client()
    client.force_login(f.make_person(workspace, "ops", "operator"))
    for path in ("/no-such-page/", "/threads/00000000-0000-0000-0000-000000000000/"):
        answer = client.get(path)
        assert answer.status_code == 404, path
        page = answer.content.decode()
        assert "Nothing here in your workspaces" in page, path
        assert "URLconf" not in page and "Using the URLconf" not in page
    _assert_json_404(client.get("/api/v1/nope/"))
    # APPEND_SLASH still redirects an address missing its slash.
    assert client.get("/threads")["Location"] == "/threads/"


@pytest.mark.parametrize("debug", [True, False])
def test_the_demo_shows_the_products_own_403_and_500_pages_with_or_without_debug(
    workspace: Any, settings: Any, monkeypatch: Any, caplog: Any, debug: bool
) -> None:
    """The demo runs with DEBUG on: a refusal and a failure read as the product's pages, never
    as Django's traceback page (which shows settings and code); the failure is still logged."""
    settings.DEBUG = debug
    client = Client(raise_request_exception=False)
    client.force_login(f.make_person(workspace, "ops", "operator"))
    thread = f.make_thread(workspace, external_id="t-403")
    refused = client.post(f"/threads/{thread.pk}/settings/", {"summarizer": "structured"})
    assert refused.status_code == 403
    page = refused.content.decode()
    assert "ctxadmin" in page and "Traceback" not in page and "<title>403 Forbidden" not in page

    def broken(**kwargs: Any) -> Any:
        raise RuntimeError("boom in the selector")

    monkeypatch.setattr(selectors, "threads_in", broken)
    failed = client.get("/threads/")
    assert failed.status_code == 500
    page = failed.content.decode()
    assert "Server error." in page
    assert "boom in the selector" not in page and "Traceback" not in page
    assert "SECRET_KEY" not in page
    assert any("boom in the selector" in str(r.exc_info and r.exc_info[1]) for r in caplog.records)
