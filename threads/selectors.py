"""Every read, scoped by workspace. Another workspace's object is simply not found (404)."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import QuerySet

from threads.domain.errors import NotFound
from threads.models import Membership, Thread, Workspace


def workspaces_for_user(user: Any) -> QuerySet[Workspace]:
    return Workspace.objects.filter(memberships__user_id=user.pk).order_by("name")


def _by_id_or_external_id(queryset: QuerySet[Thread], id: str) -> Thread:
    try:
        uid = uuid.UUID(str(id))
    except ValueError:
        thread = queryset.filter(external_id=id).first()
    else:
        thread = queryset.filter(pk=uid).first() or queryset.filter(external_id=id).first()
    if thread is None:
        raise NotFound("thread not found")
    return thread


def thread_get_for_workspace(*, workspace: Workspace, id: str) -> Thread:
    """A thread by its UUID or external_id, within one workspace (agents)."""
    return _by_id_or_external_id(
        Thread.objects.select_related("workspace").filter(workspace=workspace), id
    )


def thread_get_for_member(*, user: Any, id: str) -> Thread:
    """A thread by UUID or external_id in any workspace the person belongs to."""
    workspace_ids = Membership.objects.filter(user_id=user.pk).values("workspace_id")
    return _by_id_or_external_id(
        Thread.objects.select_related("workspace").filter(workspace_id__in=workspace_ids), id
    )
