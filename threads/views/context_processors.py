"""The top bar's workspaces, roles and current workspace, on every dashboard page."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from threads import selectors
from threads.access import chosen_workspace_id


def memberships(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    # Lazy: pages that never show the top bar (htmx regions) never run the query.
    return {
        "ctx_memberships": lambda: selectors.memberships_for_user(user=user),
        "ctx_current_workspace": lambda: selectors.workspace_current_for_member(
            user=user, workspace_id=chosen_workspace_id(request)
        ),
    }
