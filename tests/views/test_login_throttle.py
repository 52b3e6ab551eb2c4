"""Login is throttled (docs/access.md, "People and access"): after CTXADMIN_LOGIN_FAILURE_LIMIT
wrong passwords for one username from one address, even the right one is refused with 429 until the
cool-off has passed; other usernames from that address are not locked."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import Client
from django.utils import timezone

from tests import factories as f

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
LIMIT = 5  # CTXADMIN_LOGIN_FAILURE_LIMIT's default


def _login(client: Client, username: str, password: str, **extra: Any) -> Any:
    return client.post(LOGIN, {"username": username, "password": password}, **extra)


def test_the_defaults() -> None:
    assert settings.CTXADMIN_LOGIN_FAILURE_LIMIT == LIMIT
    assert settings.CTXADMIN_LOGIN_COOLOFF_MINUTES == 15
    assert settings.CTXADMIN_TRUSTED_PROXIES == 0


def test_wrong_passwords_lock_the_username_until_the_cool_off(workspace: Any) -> None:
    f.make_person(workspace, "ada", "operator")
    f.make_person(workspace, "bob", "operator")
    client = Client()
    for _ in range(LIMIT):
        assert _login(client, "ada", "wrong").status_code in (200, 429)

    locked = _login(client, "ada", f.PASSWORD)
    assert locked.status_code == 429
    body = locked.content.decode()
    assert "Too many failed logins" in body and "Traceback" not in body
    assert "_auth_user_id" not in client.session

    # Another username from the same address is not locked.
    other = Client()
    assert _login(other, "bob", f.PASSWORD).status_code == 302

    # After the cool-off the right password works again.
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert _login(Client(), "ada", f.PASSWORD).status_code == 302


def test_the_same_username_from_another_address_is_not_locked(workspace: Any) -> None:
    f.make_person(workspace, "ada", "operator")
    for _ in range(LIMIT):
        _login(Client(), "ada", "wrong", REMOTE_ADDR="10.0.0.1")
    assert _login(Client(), "ada", f.PASSWORD, REMOTE_ADDR="10.0.0.1").status_code == 429
    assert _login(Client(), "ada", f.PASSWORD, REMOTE_ADDR="10.0.0.2").status_code == 302


def test_x_forwarded_for_is_ignored_unless_proxies_are_trusted(
    workspace: Any, settings: Any
) -> None:
    f.make_person(workspace, "ada", "operator")
    settings.CTXADMIN_TRUSTED_PROXIES = 0
    for n in range(LIMIT):
        # A client that forges the header cannot spread its attempts over addresses.
        _login(Client(), "ada", "wrong", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}")
    assert _login(Client(), "ada", f.PASSWORD, HTTP_X_FORWARDED_FOR="1.2.3.4").status_code == 429


def test_behind_a_trusted_proxy_the_client_address_comes_from_x_forwarded_for(
    workspace: Any, settings: Any
) -> None:
    f.make_person(workspace, "ada", "operator")
    settings.CTXADMIN_TRUSTED_PROXIES = 1
    for _ in range(LIMIT):
        # The proxy appends the address it saw; anything before it is the client's claim.
        _login(Client(), "ada", "wrong", HTTP_X_FORWARDED_FOR="6.6.6.6, 198.51.100.7")
    blocked = _login(Client(), "ada", f.PASSWORD, HTTP_X_FORWARDED_FOR="7.7.7.7, 198.51.100.7")
    assert blocked.status_code == 429
    assert (
        _login(Client(), "ada", f.PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.8").status_code == 302
    )
