"""An admin's change to a thread (docs/api.md, "Settings — `PATCH /api/v1/threads/{id}/`"): its
title, its summariser and fold settings, and whether its folds are paused — one request, one
transaction, one audit entry per kind of change."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from threads.access import require_role
from threads.domain.budget import settings_problems
from threads.domain.errors import InvalidEvent
from threads.models import Role, Thread
from threads.services.audit import audit_record, required_text_clean
from threads.services.pins import pin_locked, unpin_locked
from threads.services.threads import THREAD_SETTINGS, summarizer_require_available, thread_lock
from threads.services.triggers import fold_if_due

UPDATE_ROLE = Role.ADMIN
MAX_PAUSE_REASON = 2000


def thread_update(
    *,
    thread: Thread,
    actor: Any,
    title: str | None = None,
    folds_paused: bool | None = None,
    pause_reason: str | None = None,
    **settings: Any,
) -> Thread:
    """Change a thread's title, settings (THREAD_SETTINGS) and pause. Admin only.

    The new settings are held, with the thread's other settings, to the rules a creation
    obeys (settings_problems; a new summariser this server cannot run is refused too): any
    problem is InvalidEvent naming the field, and nothing changes. `folds_paused: True` pins
    the thread (no fold starts or commits until it is released) and needs `pause_reason`;
    `folds_paused: False` releases a pin, a rollback's too (`pause_reason`, optional, is the
    release's reason). `pause_reason` without `folds_paused` is refused.

    Locks the thread row (select_for_update), checks the whole against the values it
    replaces, writes the changes and their audit entries (`thread.settings` with title and
    settings before and after; `thread.pause`; `thread.unpin`) in one transaction. What
    changes nothing writes nothing: pausing a paused thread keeps its pin (who, when, why) as
    it is. After a release commits, the fold triggers are looked at (fold_if_due), so a fold
    the paused time held back runs. Returns the thread as stored.
    """
    unknown = sorted(set(settings) - set(THREAD_SETTINGS))
    if unknown:
        raise InvalidEvent(
            f"not a setting that may change: {', '.join(unknown)}",
            fields={name: "may not be changed" for name in unknown},
        )
    reason = _pause_reason_clean(folds_paused, pause_reason)
    require_role(actor, thread.workspace, UPDATE_ROLE)
    released = False
    with transaction.atomic(durable=True):
        locked = thread_lock(thread)
        changes = dict(settings)
        if title is not None:
            changes["title"] = title
        _settings_apply(locked, actor, changes)
        if folds_paused is True and locked.pinned_at is None:
            audit_record(
                workspace=locked.workspace,
                actor=actor,
                action="thread.pause",
                target_type="thread",
                target_id=locked.pk,
                thread=locked,
                before={"folds_paused": False},
                after=pin_locked(locked, actor, reason),
            )
        elif folds_paused is False and locked.pinned_at is not None:
            audit_record(
                workspace=locked.workspace,
                actor=actor,
                action="thread.unpin",
                target_type="thread",
                target_id=locked.pk,
                thread=locked,
                before=unpin_locked(locked),
                after={"reason": reason},
            )
            released = True
    locked.refresh_from_db()
    if released:
        fold_if_due(locked)
    return locked


def _pause_reason_clean(folds_paused: bool | None, pause_reason: str | None) -> str:
    if folds_paused is None:
        if pause_reason is not None:
            raise InvalidEvent(
                "pause_reason goes with folds_paused",
                fields={"pause_reason": "only with folds_paused"},
            )
        return ""
    if folds_paused:
        return required_text_clean(
            pause_reason or "",
            field="pause_reason",
            limit=MAX_PAUSE_REASON,
            missing="pausing folds needs a pause_reason",
            hint=f"must be at most {MAX_PAUSE_REASON} characters",
        )
    reason = (pause_reason or "").strip()
    if len(reason) > MAX_PAUSE_REASON:
        raise InvalidEvent(
            "pause_reason is too long",
            fields={"pause_reason": f"must be at most {MAX_PAUSE_REASON} characters"},
        )
    return reason or "folds resumed"


def _settings_apply(locked: Thread, actor: Any, changes: dict[str, Any]) -> None:
    """Write the changed title and settings and their audit entry, under the caller's lock;
    InvalidEvent, before any write, when the settings would not hold as a whole."""
    before = {name: getattr(locked, name) for name in changes}
    changed = {name: value for name, value in changes.items() if before[name] != value}
    if "summarizer" in changed:
        # Only a new summariser: a form that sends the thread's own back changes nothing.
        summarizer_require_available(changed["summarizer"])
    merged = {name: getattr(locked, name) for name in THREAD_SETTINGS}
    merged.update({k: v for k, v in changes.items() if k in THREAD_SETTINGS})
    merged["tool_tokens"] = locked.tool_tokens
    problems = settings_problems(merged)
    if problems:
        raise InvalidEvent(f"invalid settings: {'; '.join(problems.values())}", fields=problems)
    if not changed:
        return
    Thread.objects.filter(pk=locked.pk).update(**changed, updated_at=timezone.now())
    audit_record(
        workspace=locked.workspace,
        actor=actor,
        action="thread.settings",
        target_type="thread",
        target_id=locked.pk,
        thread=locked,
        before={name: before[name] for name in changed},
        after=changed,
    )
    for name, value in changed.items():
        setattr(locked, name, value)
