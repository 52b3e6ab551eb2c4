"""Migration 0027 (redaction, docs/event-log.md, "Redaction"): over a log stored before it (chain
v1) the event table is not rewritten and keeps its triggers, every stored row is as it was and
still verifies, and events appended after are chained v2 in the same thread; unapplying it is
refused while an event is chained through a salted digest."""

from __future__ import annotations

import pytest

from tests import factories as f
from tests.services.test_migration_0026 import _leaf, _log, _migrate, _storage, _triggers
from threads.models import Event, Thread
from threads.services.integrity import integrity_check

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("threads", "0026_event_secrets")]


def test_a_v1_log_crosses_0027_unchanged_and_goes_on_in_v2(thread: Thread) -> None:
    events = Event._meta.db_table
    f.append(thread, f.user("hello"), f.assistant("hi"))
    f.as_chain_v1(thread)
    _migrate(BEFORE)
    stored, storage, triggers = _log(thread.pk), _storage(events), _triggers(events)
    _migrate(_leaf())
    assert _storage(events) == storage and _log(thread.pk) == stored
    assert _triggers(events) >= triggers - {"threads_event_append_only"}
    thread.refresh_from_db()
    assert integrity_check(thread=thread, full=True).ok
    (row,) = f.append(thread, f.user("and now"))
    assert row.content_digest is not None
    thread.refresh_from_db()
    assert integrity_check(thread=thread, full=True).ok
    with pytest.raises(RuntimeError, match="cannot be unapplied: 1 events"):
        _migrate(BEFORE)
    # The later migrations went back before 0027 refused: forwards again, for the next test.
    _migrate(_leaf())
