"""One notion of the client's address (threads/client_address.py), on the production settings
(DEBUG off): the login lockout and `/metrics` read the same address from the same request;
without a token `/metrics` answers only a request no proxy forwarded; `check --deploy` warns
about a missing metrics token and an untrusted proxy; and requests a proxy forwarded while no
proxy is trusted are counted in `/metrics` and logged once."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests import factories as f
from threads import client_address
from threads.checks import client_address_check

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
LIMIT = 5  # CTXADMIN_LOGIN_FAILURE_LIMIT's default
TOKEN = "metrics-token-for-proxy-tests"
UNTRUSTED = "ctxadmin_untrusted_forwarded_requests"


@pytest.fixture
def production(production: Any) -> Any:
    """The shared production settings (tests/conftest.py), as this module's cases start: no
    metrics token and no trusted proxy (both defaults), each test setting what it is about; and
    DJANGO_SECURE_SSL_REDIRECT=0 (the proxy redirects), since these requests are plain HTTP, as
    a scraper on this machine reads gunicorn. With the redirect on, see
    tests/runtime/test_hardening_production.py."""
    production.CTXADMIN_METRICS_TOKEN = ""
    production.CTXADMIN_TRUSTED_PROXIES = 0
    production.SECURE_SSL_REDIRECT = False
    return production


def _login(username: str, password: str, **extra: Any) -> Any:
    return Client().post(LOGIN, {"username": username, "password": password}, **extra)


def _untrusted_total(client: Client) -> float:
    answer = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert answer.status_code == 200
    for family in text_string_to_metric_families(answer.content.decode()):
        if family.name == UNTRUSTED:
            return sum(s.value for s in family.samples if s.name == f"{UNTRUSTED}_total")
    raise AssertionError(f"{UNTRUSTED} missing from /metrics")


def test_behind_a_trusted_proxy_metrics_refuses_what_the_lockout_sees_as_forwarded(
    production: Any, workspace: Any
) -> None:
    """The issue's case: through the proxy (REMOTE_ADDR loopback) with any X-Forwarded-For, the
    login lockout counts the forwarded address, and /metrics no longer answers it as loopback."""
    production.CTXADMIN_TRUSTED_PROXIES = 1
    f.make_person(workspace, "ada", "operator")
    through_proxy: dict[str, Any] = {
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_X_FORWARDED_FOR": "203.0.113.9",
    }
    for _ in range(LIMIT):
        _login("ada", "wrong", **through_proxy)
    assert _login("ada", f.PASSWORD, **through_proxy).status_code == 429
    # The lockout is the forwarded client's, not the proxy's: another client passes.
    other: dict[str, Any] = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "198.51.100.7"}
    assert _login("ada", f.PASSWORD, **other).status_code == 302

    client = Client()
    assert client.get("/metrics", **through_proxy).status_code == 403
    # A forged loopback in the header is still a forwarded request.
    forged: dict[str, Any] = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "127.0.0.1"}
    assert client.get("/metrics", **forged).status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200


@pytest.mark.parametrize(
    "header",
    [
        {"HTTP_X_FORWARDED_FOR": "127.0.0.1"},
        {"HTTP_FORWARDED": "for=127.0.0.1;proto=https"},
        {"HTTP_X_REAL_IP": "::1"},
    ],
)
def test_without_trusted_proxies_a_forwarded_loopback_request_is_refused(
    production: Any, header: dict[str, Any]
) -> None:
    """With the default CTXADMIN_TRUSTED_PROXIES=0, a proxy on this machine makes every client
    loopback: a request carrying a proxy's header is not answered as local."""
    assert production.CTXADMIN_TRUSTED_PROXIES == 0
    client = Client()
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", **header).status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200


def test_a_token_reads_metrics_through_the_proxy(production: Any) -> None:
    production.CTXADMIN_TRUSTED_PROXIES = 1
    production.CTXADMIN_METRICS_TOKEN = TOKEN
    client = Client()
    through_proxy: dict[str, Any] = {
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_X_FORWARDED_FOR": "203.0.113.9",
    }
    assert client.get("/metrics", **through_proxy).status_code == 401
    answer = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}", **through_proxy)
    assert answer.status_code == 200


def test_check_deploy_warns_without_a_metrics_token(production: Any) -> None:
    production.CTXADMIN_TRUSTED_PROXIES = 1
    assert [w.id for w in client_address_check()] == ["ctxadmin.W003"]
    production.CTXADMIN_METRICS_TOKEN = TOKEN
    assert client_address_check() == []
    production.DEBUG = True
    production.CTXADMIN_METRICS_TOKEN = ""
    assert client_address_check() == []


def test_check_deploy_warns_of_a_proxy_that_is_not_trusted(production: Any) -> None:
    """TLS ends at a proxy (SECURE_PROXY_SSL_HEADER) yet no proxy is trusted: everyone is the
    proxy's address to the lockout."""
    production.CTXADMIN_METRICS_TOKEN = TOKEN
    production.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    production.CTXADMIN_TRUSTED_PROXIES = 0
    assert [w.id for w in client_address_check()] == ["ctxadmin.W004"]
    production.CTXADMIN_TRUSTED_PROXIES = 1
    assert client_address_check() == []
    production.CTXADMIN_TRUSTED_PROXIES = 0
    production.SECURE_PROXY_SSL_HEADER = None
    assert client_address_check() == []


def test_forwarded_requests_without_a_trusted_proxy_are_counted_and_logged_once(
    production: Any, workspace: Any, caplog: Any, monkeypatch: Any
) -> None:
    """What `check --deploy` cannot see: the lockout-for-everyone setup shows at run time."""
    monkeypatch.setattr(client_address, "_warned", False)
    f.make_person(workspace, "ada", "operator")
    client = Client()
    before = _untrusted_total(client)
    with caplog.at_level(logging.WARNING, logger="threads.client_address"):
        for n in range(3):
            _login("ada", "wrong", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}")
        client.get("/accounts/login/", REMOTE_ADDR="127.0.0.1")  # not forwarded: not counted
    assert _untrusted_total(client) == before + 3
    warnings = [r for r in caplog.records if r.name == "threads.client_address"]
    assert len(warnings) == 1
    assert "CTXADMIN_TRUSTED_PROXIES is 0" in warnings[0].getMessage()

    # Trusted: nothing to report.
    production.CTXADMIN_TRUSTED_PROXIES = 1
    _login("ada", "wrong", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.50")
    assert _untrusted_total(client) == before + 3
