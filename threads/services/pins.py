"""Pausing a thread's folds, and releasing the pause (docs/repairs.md, "Rollback").

A pin pauses the thread's folds: while it holds, no fold starts or commits, so the summary
at the head stays the head. A rollback may pin its thread (threads.services.rollback); an
admin may pause without one (threads.services.thread_update). A release, by an admin, lets
folds go on; whatever the paused time's events call for is folded then.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from threads.access import require_role
from threads.domain.errors import Conflict
from threads.models import Role, Thread
from threads.services.audit import audit_record, reason_clean
from threads.services.threads import thread_lock
from threads.services.triggers import fold_if_due

PIN_ROLE = Role.ADMIN


class ThreadNotPinned(Conflict):
    code = "thread_not_pinned"


def pin_locked(locked: Thread, actor: Any, reason: str) -> dict[str, Any]:
    """Pin the thread (under the caller's lock on its row): who, when and why, as the audit
    entry records them."""
    locked.pinned_at = timezone.now()
    locked.pinned_by = actor.get_username() if hasattr(actor, "get_username") else str(actor)
    locked.pin_reason = reason
    Thread.objects.filter(pk=locked.pk).update(
        pinned_at=locked.pinned_at, pinned_by=locked.pinned_by, pin_reason=reason
    )
    return {
        "pinned_by": locked.pinned_by,
        "pinned_at": locked.pinned_at.isoformat(),
        "pin_reason": reason,
    }


def unpin_locked(locked: Thread) -> dict[str, Any]:
    """Release the thread's pin (under the caller's lock on its row). Returns the pin it
    released, for the audit entry's `before`."""
    assert locked.pinned_at is not None
    released = {
        "pinned_by": locked.pinned_by,
        "pinned_at": locked.pinned_at.isoformat(),
        "pin_reason": locked.pin_reason,
    }
    Thread.objects.filter(pk=locked.pk).update(pinned_at=None, pinned_by="", pin_reason="")
    locked.pinned_at, locked.pinned_by, locked.pin_reason = None, "", ""
    return released


def thread_unpin(*, thread: Thread, actor: Any, reason: str) -> Thread:
    """Release the thread's pin. Admin only, with a reason.

    Locks the thread row (select_for_update), refuses a thread that is not pinned
    (ThreadNotPinned), clears the pin and audits it (the pin it released as `before`, the
    reason as `after`) in one transaction. Once that commits, the fold triggers are looked at
    for the events after the head (fold_if_due), so a fold the pinned time held back runs.
    Returns the thread as stored.
    """
    require_role(actor, thread.workspace, PIN_ROLE)
    reason = reason_clean(reason)
    with transaction.atomic(durable=True):
        locked = thread_lock(thread)
        if locked.pinned_at is None:
            raise ThreadNotPinned("the thread is not pinned", fields={"thread": "not pinned"})
        before = unpin_locked(locked)
        audit_record(
            workspace=locked.workspace,
            actor=actor,
            action="thread.unpin",
            target_type="thread",
            target_id=locked.pk,
            thread=locked,
            before=before,
            after={"reason": reason},
        )
    locked.refresh_from_db()
    fold_if_due(locked)
    return locked
