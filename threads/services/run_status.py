"""The marks a thread's run status is derived from (docs/dashboard.md, "Run status").

Two writers: a person's change the agent has to pick up (a decision, a resolution, a rollback)
marks the thread as owing a pickup, under the thread's lock and in the change's transaction;
the agent's read of its context, approvals or its saved graph state picks up what it saw. The
agent's appends are marked with the events themselves (threads.services.event_rows).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Case, F, Q, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from threads.domain.run_status import READ_RECORD_EVERY
from threads.models import Thread


def agent_owed_locked(thread: Thread, *, now: datetime) -> datetime:
    """Mark `thread` as owing its agent a pickup of a change made at `now`; return the time
    stored, which the caller records as the change's own time (an approval's decided_at), so
    a card can say whether the agent picked that change up.

    Runs inside the caller's transaction, which holds the thread's lock (select_for_update):
    `thread` is the locked row. The time only increases, so a read that saw it knows that
    nothing came after it."""
    if thread.agent_owed_at is not None and now <= thread.agent_owed_at:
        now = thread.agent_owed_at + timedelta(microseconds=1)
    Thread.objects.filter(pk=thread.pk).update(
        agent_owed_at=now, agent_owed_since=Coalesce(F("agent_owed_since"), now)
    )
    thread.agent_owed_at = now
    if thread.agent_owed_since is None:
        thread.agent_owed_since = now
    return now


def agent_read_record(*, thread: Thread) -> bool:
    """Record that the thread's agent read its context, approvals or its saved graph state; return
    whether a row was written.

    `thread` is the thread row as the request read it *before* reading what it answers: every
    change up to its agent_owed_at was committed before that answer was read, so the agent
    has seen them, and they are picked up. Nothing is sent to the database unless the read
    picks something up or the stored read time is older than READ_RECORD_EVERY (by that row),
    so a busy agent's reads cost no statement, let alone a write, each; otherwise one
    conditional UPDATE of the thread row, no lock taken first, which re-checks the same
    conditions against the row as it is then.

    When a change came after what the read saw, the thread still owes a pickup; its
    agent_owed_since moves up to the last change's time (the first one after the read is not
    kept), so "since when" may read late by the time between two changes."""
    now = timezone.now()
    seen_owed_at = thread.agent_owed_at
    stale = now - READ_RECORD_EVERY
    picks_up = (
        seen_owed_at is not None
        and thread.agent_owed_since is not None
        and thread.agent_owed_since <= seen_owed_at
    )
    if not picks_up and thread.agent_read_at is not None and thread.agent_read_at >= stale:
        return False
    due = Q(agent_read_at__isnull=True) | Q(agent_read_at__lt=stale)
    values: dict[str, Any] = {"agent_read_at": now}
    if seen_owed_at is not None:
        due |= Q(agent_owed_since__lte=seen_owed_at)
        values["agent_owed_since"] = Case(
            When(agent_owed_at__lte=seen_owed_at, then=None),
            When(agent_owed_since__lte=seen_owed_at, then=F("agent_owed_at")),
            default=F("agent_owed_since"),
        )
    return bool(Thread.objects.filter(due, pk=thread.pk).update(**values))
