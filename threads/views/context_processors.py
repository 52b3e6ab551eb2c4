"""The top bar's workspaces, roles and current workspace, on every dashboard page."""

from __future__ import annotations

import functools
from typing import Any

from django.http import HttpRequest

from threads import selectors
from threads.access import chosen_workspace_id
from threads.models import Role


def memberships(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    # Lazy: pages that never show the top bar (htmx regions) never run the query; cached, so
    # the nav and the top bar share it.
    rows = functools.cache(lambda: selectors.memberships_for_user(user=user))
    return {
        "ctx_memberships": rows,
        "ctx_is_admin": lambda: any(m.role == Role.ADMIN for m in rows()),
        "ctx_current_workspace": lambda: selectors.workspace_current_for_member(
            user=user, workspace_id=chosen_workspace_id(request)
        ),
    }
