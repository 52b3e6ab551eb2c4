"""The audit log."""

from __future__ import annotations

import uuid
from typing import Any, TypeVar

from django.db.models import (
    Model,
    Q,
    QuerySet,
)

from threads.models import (
    AuditEntry,
)
from threads.selectors.threads import member_workspace_ids

RowT = TypeVar("RowT", bound=Model)


def audit_for_member(
    *, user: Any, actor: str = "", action: str = "", thread: str = ""
) -> QuerySet[AuditEntry]:
    entries = AuditEntry.objects.filter(workspace_id__in=member_workspace_ids(user))
    if actor:
        entries = entries.filter(actor_label=actor)
    if action:
        entries = entries.filter(action=action)
    if thread:
        entries = filter_by_thread(entries, thread)
    return entries.select_related("thread", "workspace").order_by("-created_at", "-pk")


def filter_by_thread(rows: QuerySet[RowT], thread: str) -> QuerySet[RowT]:
    """Rows of one thread, named by its UUID or its external_id (a list's `thread` filter)."""
    return rows.filter(Q(thread__external_id=thread) | Q(thread_id__in=_uuid_or_none(thread)))


def _uuid_or_none(value: str) -> list[uuid.UUID]:
    try:
        return [uuid.UUID(value)]
    except ValueError:
        return []


def audit_facets_for_member(*, user: Any) -> dict[str, list[str]]:
    entries = AuditEntry.objects.filter(workspace_id__in=member_workspace_ids(user)).order_by()
    return {
        "actors": sorted(set(entries.values_list("actor_label", flat=True).distinct())),
        "actions": sorted(set(entries.values_list("action", flat=True).distinct())),
    }
