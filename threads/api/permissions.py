"""DRF permission classes and request scoping for people's repair actions (docs/access.md,
"People and access").

Repairs (resolve, decide, roll back, fork, checkpoints) are people's work: an agent's API key
never does them, whatever the workspace. Which role a person needs is checked against the
object's workspace by the service (threads.access.require_role), after the object was found in
the caller's workspaces: another workspace's object is 404, a missing role is 403.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from threads.api.auth import is_agent
from threads.selectors import member_workspace_ids


class IsPerson(BasePermission):
    """A person logged in with a session (CSRF enforced by SessionAuthentication), not an
    agent key."""

    message = "only people (session login) may do this; agent API keys may not"

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        return isinstance(user, AbstractBaseUser) and bool(user.is_authenticated)


class IsPersonForWrites(IsPerson):
    """Reads for agents and people; unsafe methods for people only."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return request.user is not None and bool(request.user.is_authenticated)
        return super().has_permission(request, view)


def workspace_ids_for_request(request: Request) -> Any:
    """The workspaces the caller sees: an agent's own, or every one the person belongs to."""
    if is_agent(request.user):
        return [request.user.workspace.pk]  # type: ignore[union-attr]
    return member_workspace_ids(request.user)
