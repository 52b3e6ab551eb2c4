"""Who may do what (docs/access.md, "People and access"): operator < reviewer < admin, per
workspace."""

from __future__ import annotations

from typing import Any

from threads.domain.errors import PermissionDenied
from threads.models import ROLE_RANK, Membership, Role, Workspace

# Rolling back, and previewing a rollback (its first step, which shows what the rollback would
# undo), need this role; the API, the dashboard and the rollback service all read it here.
ROLLBACK_ROLE = Role.ADMIN


def member_role(user: Any, workspace: Workspace) -> str | None:
    if user is None or not getattr(user, "is_authenticated", False) or not hasattr(user, "pk"):
        return None
    return (
        Membership.objects.filter(user_id=user.pk, workspace=workspace)
        .values_list("role", flat=True)
        .first()
    )


def has_role(role: str | None, needed: Role) -> bool:
    return role is not None and ROLE_RANK[Role(role)] >= ROLE_RANK[needed]


def require_role(user: Any, workspace: Workspace, needed: Role) -> str:
    """Raise PermissionDenied unless the person holds `needed` or a higher role."""
    role = member_role(user, workspace)
    if not has_role(role, needed):
        raise PermissionDenied(f"this needs the {needed.value} role in {workspace.name}")
    assert role is not None
    return role


def require_rollback_role(user: Any, workspace: Workspace) -> str:
    """Raise PermissionDenied unless the person may roll back (and so preview a rollback)."""
    return require_role(user, workspace, ROLLBACK_ROLE)


# The session key holding the workspace a person chose in the dashboard's switcher: their
# current workspace, where an external_id resolves (threads.selectors.thread_get_for_member).
CURRENT_WORKSPACE_SESSION_KEY = "ctx_workspace"


def chosen_workspace_id(request: Any) -> int | None:
    """The workspace id the person chose, from the session (None: no choice yet)."""
    session = getattr(request, "session", None)
    value = session.get(CURRENT_WORKSPACE_SESSION_KEY) if session is not None else None
    return value if isinstance(value, int) else None
