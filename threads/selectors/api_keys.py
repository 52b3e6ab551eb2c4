"""Workspace API keys: finding the key an agent's request carries."""

from __future__ import annotations

from typing import Any, cast

from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from threads.domain.errors import NotFound
from threads.models import (
    ApiKey,
    Workspace,
)


def api_key_get_active(*, digest: str) -> ApiKey | None:
    """The unrevoked, unexpired key with this digest and its workspace, in one query.

    Written as SQL because it runs on every agent request: compiling the equivalent ORM query
    (select_related + filter + first) costs more CPU than executing it.
    """
    quote = connection.ops.quote_name
    keys = list(
        ApiKey.objects.raw(
            f"SELECT k.*, w.{quote('name')} AS workspace_name "
            f"FROM {quote(ApiKey._meta.db_table)} k "
            f"JOIN {quote(Workspace._meta.db_table)} w ON w.id = k.workspace_id "
            "WHERE k.key_hash = %s AND k.revoked_at IS NULL "
            "AND (k.expires_at IS NULL OR k.expires_at > %s)",
            [digest, timezone.now()],
        )
    )
    if not keys:
        return None
    key: Any = keys[0]  # carries the extra workspace_name column
    # A workspace with only id and name loaded; other fields load on first access.
    key.workspace = Workspace.from_db(
        ApiKey.objects.db, ["id", "name"], [key.workspace_id, key.workspace_name]
    )
    return cast(ApiKey, key)


def api_keys_for_workspaces(*, workspace_ids: list[int]) -> QuerySet[ApiKey]:
    """The keys of these workspaces, newest first (the dashboard's keys page)."""
    return (
        ApiKey.objects.filter(workspace_id__in=workspace_ids)
        .select_related("workspace")
        .order_by("-created_at", "-pk")
    )


def api_key_get_in(*, workspace_ids: list[int], id: int) -> ApiKey:
    """One key of these workspaces; any other is not found."""
    key = api_keys_for_workspaces(workspace_ids=workspace_ids).filter(pk=id).first()
    if key is None:
        raise NotFound("API key not found")
    return key
