"""Trace imports: an upload's state, counts and per-conversation report (docs/api.md,
"Imports — `/api/v1/imports/`")."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import QuerySet

from integrations.trace_imports.models import TraceImport
from threads.domain.errors import InvalidEvent, NotFound, PermissionDenied
from threads.models import Membership, Role, Workspace
from threads.selectors.threads import member_workspace_ids

# Everything but the uploaded bytes, which only the import's task reads.
_LISTED = TraceImport.objects.defer("content").select_related("workspace", "task_run")


def trace_import_get_for_member(*, user: Any, id: Any) -> TraceImport:
    """An import of one of the person's workspaces; any other id is not found."""
    return _one(_LISTED.filter(workspace_id__in=member_workspace_ids(user)), id)


def trace_import_get_for_workspace(*, workspace: Workspace, id: Any) -> TraceImport:
    return _one(_LISTED.filter(workspace=workspace), id)


def _one(imports: QuerySet[TraceImport], id: Any) -> TraceImport:
    try:
        pk = uuid.UUID(str(id))
    except ValueError:
        raise NotFound("import not found") from None
    found = imports.filter(pk=pk).first()
    if found is None:
        raise NotFound("import not found")
    return found


def trace_imports_for_member(*, user: Any, workspace_ids: Any = None) -> QuerySet[TraceImport]:
    """The person's workspaces' imports (or those of `workspace_ids` among them), newest
    first, without their reports' bulk: the list shows counts only."""
    ids = member_workspace_ids(user)
    imports = _LISTED.defer("content", "report").filter(workspace_id__in=ids)
    if workspace_ids is not None:
        imports = imports.filter(workspace_id__in=workspace_ids)
    return imports.order_by("-created_at", "-pk")


def import_workspace_for_member(*, user: Any, name: str = "") -> Workspace:
    """Where a person's upload goes: the named workspace among theirs (another name is not
    found), or, unnamed, the one workspace they are an admin of. Whether they may import there
    is the service's check."""
    memberships = Membership.objects.filter(user_id=user.pk).select_related("workspace")
    if name:
        membership = memberships.filter(workspace__name=name).first()
        if membership is None:
            raise NotFound(f"no workspace named {name!r}")
        return membership.workspace
    admin_of = [m.workspace for m in memberships.filter(role=Role.ADMIN).order_by("pk")[:2]]
    if not admin_of:
        raise PermissionDenied("importing needs the admin role in a workspace")
    if len(admin_of) > 1:
        raise InvalidEvent(
            "name the workspace to import into",
            fields={"workspace": "required: you are an admin of several workspaces"},
        )
    return admin_of[0]
