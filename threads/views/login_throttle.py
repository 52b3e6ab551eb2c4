"""Login throttling (django-axes, configured in ctxadmin/settings.py; docs/access.md,
"People and access"): the page a locked-out login answers. Attempts are counted by
`threads.client_address`."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


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
