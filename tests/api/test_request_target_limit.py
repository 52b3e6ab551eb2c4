"""A request target too long for the contract is answered inside it (docs/api.md, "Codes"): 414
`uri_too_long` in the error shape under /api/, plain text elsewhere; on the production settings
(DEBUG off), from Django's test client and from a real gunicorn with ctxadmin's config, whose
own `limit_request_line` would answer an HTML 414."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.test import Client

from tests.stack import Gunicorn
from threads.middleware import MAX_REQUEST_TARGET

pytestmark = pytest.mark.django_db


def _query_of(total: int, path: str) -> str:
    """A target of exactly `total` bytes: `path` and a query string."""
    return path + "?q=" + "a" * (total - len(path) - 3)


@pytest.fixture
def production(settings: Any) -> Any:
    settings.DEBUG = False
    return settings


def test_a_long_query_string_is_a_json_414_under_the_api(production: Any) -> None:
    client = Client()
    target = _query_of(MAX_REQUEST_TARGET + 1, "/api/v1/threads/")
    answer = client.get(target)
    assert answer.status_code == 414
    assert answer["Content-Type"] == "application/json"
    error = answer.json()["error"]
    assert error["code"] == "uri_too_long" and error["fields"] == {}
    assert str(MAX_REQUEST_TARGET) in error["message"]
    # At the limit the request goes on to the view (unauthenticated here).
    assert client.get(_query_of(MAX_REQUEST_TARGET, "/api/v1/threads/")).status_code == 401


def test_a_long_query_string_elsewhere_is_plain_text(production: Any) -> None:
    for path in ("/threads/", "/metrics"):
        answer = Client().get(_query_of(MAX_REQUEST_TARGET + 500, path))
        assert answer.status_code == 414
        assert answer["Content-Type"].startswith("text/plain")
        assert b"<html" not in answer.content.lower()


@pytest.fixture
def production_gunicorn(tmp_path: Path) -> Iterator[Gunicorn]:
    """gunicorn with ctxadmin's config and production settings, one worker: the 414 is
    answered before anything reads the database, so it needs none."""
    env = {
        "PATH": "/usr/bin:/bin",
        "CTXADMIN_VAR_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "ctxadmin.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(48),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_SECURE_SSL_REDIRECT": "0",
    }
    server = Gunicorn(env=env, log=tmp_path / "gunicorn.log", workers=1)
    server.start(ready_path="/api/v1/?ready")
    try:
        yield server
    finally:
        server.stop()


def test_gunicorn_passes_a_long_line_to_the_json_414(production_gunicorn: Gunicorn) -> None:
    """gunicorn's default limit_request_line (4094) would answer this line with its HTML 414;
    ctxadmin's config lets it through to the middleware's JSON one."""
    target = _query_of(MAX_REQUEST_TARGET + 100, "/api/v1/threads/")
    answer = httpx.get(production_gunicorn.url + target, timeout=30)
    assert answer.status_code == 414
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["error"]["code"] == "uri_too_long"
