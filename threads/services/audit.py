"""The audit log: every mutating action, written in the same transaction as the action."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from threads.domain.errors import InvalidEvent
from threads.models import AuditEntry, Thread, Workspace

MAX_REASON = 2000


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


def required_text_clean(value: str, *, field: str, limit: int, missing: str, hint: str) -> str:
    """A person's text for an audited action (a reason, evidence): stripped, and refused
    (InvalidEvent naming `field`) when blank (`missing`) or longer than `limit` (`hint`)."""
    value = (value or "").strip()
    if not value:
        raise InvalidEvent(missing, fields={field: "this field is required"})
    if len(value) > limit:
        raise InvalidEvent(f"{field} is too long", fields={field: hint})
    return value


def reason_clean(reason: str) -> str:
    """The reason for a decision (an approval's, a rollback's), at most MAX_REASON characters."""
    return required_text_clean(
        reason,
        field="reason",
        limit=MAX_REASON,
        missing="a reason is required",
        hint=f"must be at most {MAX_REASON} characters",
    )
