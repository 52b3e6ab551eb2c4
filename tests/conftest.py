"""Shared fixtures: workspaces with API keys, people per role, threads, and an agent client."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import TransactionTestCase
from rest_framework.test import APIClient

from tests import factories
from threads.database.guard import log_seal_opened

_fixture_teardown = TransactionTestCase._fixture_teardown  # type: ignore[attr-defined]


def _fixture_teardown_with_open_seal(self: TransactionTestCase) -> None:
    # Flushing a transactional test's database deletes event rows, which the SQLite
    # append-only triggers refuse by design; the flush is test maintenance, not app code.
    with log_seal_opened():
        _fixture_teardown(self)


TransactionTestCase._fixture_teardown = _fixture_teardown_with_open_seal  # type: ignore[attr-defined]


@pytest.fixture(autouse=True, scope="session")
def fast_password_hashing() -> None:
    """Every person a fixture makes hashes a password; the production hasher spends about
    0.3 s on each by design. Tests are not an attack on those hashes: a fast hasher, as
    Django's own testing docs advise. Nothing under test starts a process that checks one."""
    from django.conf import settings as django_settings
    from django.contrib.auth import hashers

    django_settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    hashers.get_hashers.cache_clear()  # type: ignore[attr-defined]
    hashers.get_hashers_by_algorithm.cache_clear()  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def no_api_rate_limit(settings: Any) -> None:
    """Tests send many requests with one key (fuzzing, matrices); the rate limit is tested
    where a test sets CTXADMIN_API_RATE itself (tests/api/test_rate_limits.py)."""
    settings.CTXADMIN_API_RATE = ""


PRODUCTION_METRICS_TOKEN = "metrics-token-for-production-tests"


@pytest.fixture
def production(settings: Any) -> Any:
    """The settings a deployment runs on (docs/operations.md): what DJANGO_DEBUG=0 turns on in
    ctxadmin/settings.py's `if not DEBUG:` block (HTTPS redirect, TLS ended at a proxy that sets
    X-Forwarded-Proto, secure cookies, HSTS), a metrics token, and one trusted proxy in front.
    The test settings import with DEBUG on, so that block never ran: this sets what it sets.
    A test about a missing token or an untrusted proxy changes that one setting."""
    settings.DEBUG = False
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SESSION_COOKIE_SECURE = True
    settings.CSRF_COOKIE_SECURE = True
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    settings.SECURE_HSTS_PRELOAD = True
    settings.CTXADMIN_METRICS_TOKEN = PRODUCTION_METRICS_TOKEN
    settings.CTXADMIN_TRUSTED_PROXIES = 1
    return settings


@pytest.fixture
def workspace_and_key(db: Any) -> tuple[Any, str]:
    return factories.make_workspace("acme")


@pytest.fixture
def workspace(workspace_and_key: tuple[Any, str]) -> Any:
    return workspace_and_key[0]


@pytest.fixture
def api_key(workspace_and_key: tuple[Any, str]) -> str:
    return workspace_and_key[1]


@pytest.fixture
def agent(api_key: str) -> APIClient:
    """An API client authenticated as the workspace's agent."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key}")
    return client


@pytest.fixture
def other_agent(db: Any) -> APIClient:
    """An agent of another workspace."""
    _, key = factories.make_workspace("globex")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.fixture
def thread(workspace: Any) -> Any:
    return factories.make_thread(workspace, external_id="order-10086")


def _person_client(workspace: Any, role: str) -> APIClient:
    user = factories.make_person(workspace, f"{role}-user", role)
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    return client


@pytest.fixture
def operator_client(workspace: Any) -> APIClient:
    return _person_client(workspace, "operator")


@pytest.fixture
def reviewer_client(workspace: Any) -> APIClient:
    return _person_client(workspace, "reviewer")


@pytest.fixture
def admin_client_ws(workspace: Any) -> APIClient:
    return _person_client(workspace, "admin")


@pytest.fixture
def no_fold_triggers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Appends in this test start no fold: the test drives folding itself."""
    from threads.services import events

    monkeypatch.setattr(events, "after_append_hooks", [])
