"""Login throttling (django-axes, configured in ctxadmin/settings.py; docs/design.md §8): the
client address attempts are counted by, and the page a locked-out login answers."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def client_ip(request: HttpRequest) -> str:
    """The address failed logins are counted by (AXES_CLIENT_IP_CALLABLE).

    X-Forwarded-For is read only when CTXADMIN_TRUSTED_PROXIES says how many proxies in front
    of ctxadmin append to it: the entry the outermost trusted proxy appended is the client.
    Entries to its left are the client's own claims, so a client that forges the header cannot
    spread its attempts over made-up addresses. Otherwise REMOTE_ADDR.
    """
    proxies: int = settings.CTXADMIN_TRUSTED_PROXIES
    remote = str(request.META.get("REMOTE_ADDR", ""))
    if proxies <= 0:
        return remote
    forwarded = [
        part.strip()
        for part in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",")
        if part.strip()
    ]
    if len(forwarded) < proxies:
        return remote  # not through the proxies: nobody vouches for the header
    return forwarded[-proxies]


def locked_out(request: HttpRequest, original_response: Any, credentials: Any) -> HttpResponse:
    """A locked-out login (AXES_LOCKOUT_CALLABLE): a page that says so, HTTP 429."""
    minutes = settings.CTXADMIN_LOGIN_COOLOFF_MINUTES
    response = render(
        request,
        "registration/locked_out.html",
        {"failure_limit": settings.CTXADMIN_LOGIN_FAILURE_LIMIT, "cooloff_minutes": minutes},
        status=429,
    )
    response["Retry-After"] = str(minutes * 60)
    return response
