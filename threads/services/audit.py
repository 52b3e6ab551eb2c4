"""The audit log: every mutating action, written in the same transaction as the action."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from threads.models import AuditEntry, Thread, Workspace


def audit_record(
    *,
    workspace: Workspace,
    actor: AbstractBaseUser | AnonymousUser | None,
    action: str,
    target_type: str,
    target_id: Any,
    thread: Thread | None = None,
    before: Any = None,
    after: Any = None,
    actor_label: str = "",
) -> AuditEntry:
    user: Any = actor if isinstance(actor, AbstractBaseUser) else None
    label = actor_label or (user.get_username() if user is not None else "system")
    return AuditEntry.objects.create(
        workspace=workspace,
        actor=user,
        actor_label=label,
        action=action,
        target_type=target_type,
        target_id=str(target_id),
        thread=thread,
        before=before,
        after=after,
    )
