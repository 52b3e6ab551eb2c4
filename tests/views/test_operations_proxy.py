"""The Operations page says so when it came through a proxy ctxadmin does not trust
(CTXADMIN_TRUSTED_PROXIES = 0): behind it, every client is the proxy's address to the login
lockout and the rate limits (docs/operations.md, "Behind a proxy")."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests import factories as f
from threads.models import Workspace

pytestmark = pytest.mark.django_db

NOTICE = "This page came through a proxy that ctxadmin does not trust"


def _page(workspace: Workspace, **headers: Any) -> str:
    client = Client()
    client.force_login(f.make_person(workspace, "olga", "operator"))
    answer = client.get("/operations/", **headers)
    assert answer.status_code == 200
    return answer.content.decode()


def test_a_page_forwarded_by_an_untrusted_proxy_says_so(
    workspace: Workspace, settings: Any
) -> None:
    settings.CTXADMIN_TRUSTED_PROXIES = 0
    page = _page(workspace, HTTP_X_FORWARDED_FOR="203.0.113.7")
    assert NOTICE in page
    assert "CTXADMIN_TRUSTED_PROXIES" in page


def test_no_notice_without_a_proxy_or_with_a_trusted_one(
    workspace: Workspace, settings: Any
) -> None:
    settings.CTXADMIN_TRUSTED_PROXIES = 0
    assert NOTICE not in _page(workspace)
    settings.CTXADMIN_TRUSTED_PROXIES = 1
    assert NOTICE not in _page(workspace, HTTP_X_FORWARDED_FOR="203.0.113.7")
