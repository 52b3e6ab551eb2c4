"""The top bar's workspaces and roles, on every dashboard page."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from threads import selectors


def memberships(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    # Lazy: pages that never show the top bar (htmx regions) never run the query.
    return {"ctx_memberships": lambda: selectors.memberships_for_user(user=user)}
