"""One side-effect record per idempotency key of a thread is the database's rule, not only the
append path's (docs/repairs.md, "Side effects"): a direct second insert is refused, the API answers
as it did, and migration 0015 merges the records that databases written before the guard may
hold."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.db import IntegrityError, connection, transaction
from rest_framework.test import APIClient

from tests import factories as f
from tests.api.conftest import post_json
from threads.models import AuditEntry, Event, SideEffect, SideEffectStatus, Thread
from threads.services.side_effects import side_effect_resolve

KEY = "refund-10086"
MIGRATION_0015 = importlib.import_module("threads.migrations.0015_side_effect_key_unique")


def _log(thread: Thread) -> list[Event]:
    return list(Event.objects.filter(thread=thread).order_by("seq"))


def _record(thread: Thread, event: Event, key: str = KEY, **fields: Any) -> SideEffect:
    """A record written straight to the table, past the append path's guard."""
    with transaction.atomic():
        return SideEffect.objects.create(
            thread=thread,
            call_event=event,
            tool_call_id=event.data["tool_call_id"],
            tool_name=event.data["tool_name"],
            idempotency_key=key,
            status=fields.pop("status", SideEffectStatus.RUNNING),
            call_seq=event.seq,
            **fields,
        )


@pytest.mark.django_db
def test_a_second_record_for_a_key_is_refused_by_the_database(thread: Thread) -> None:
    f.append(
        thread,
        f.call("c1", "refund", side_effect_key=KEY),
        f.call("c2", "refund", side_effect_key=KEY),
    )
    first, retry = _log(thread)
    assert SideEffect.objects.filter(thread=thread).count() == 1  # the guard kept to it
    with pytest.raises(IntegrityError):
        _record(thread, retry)
    [kept] = SideEffect.objects.filter(thread=thread)
    assert kept.call_seq == first.seq
    # What the constraint is about: the same row with another key, or the same key on
    # another thread, is accepted.
    other = f.make_thread(thread.workspace, external_id="other")
    f.append(other, f.call("c1", "refund"))
    [elsewhere] = _log(other)
    _record(other, elsewhere)
    _record(thread, retry, key="refund-10087")
    assert SideEffect.objects.filter(idempotency_key=KEY).count() == 2


@pytest.mark.django_db
def test_the_api_answers_as_before(agent: APIClient, thread: Thread) -> None:
    url = f"/api/v1/threads/{thread.id}/events/"
    call = {**f.call("c1", "refund", side_effect_key=KEY), "client_event_id": "call-1"}
    first = post_json(agent, url, call)
    again = post_json(agent, url, call)
    retry = post_json(
        agent,
        url,
        {"events": [f.call("c2", "refund", side_effect_key=KEY), f.result("c2", "succeeded")]},
    )
    assert (first.status_code, first.json()["seq"], first.json()["replayed"]) == (201, 1, False)
    assert (again.status_code, again.json()["seq"], again.json()["replayed"]) == (200, 1, True)
    assert retry.status_code == 201, retry.content
    assert Event.objects.filter(thread=thread).count() == 3
    [record] = SideEffect.objects.filter(thread=thread)
    assert (record.call_seq, record.status) == (1, SideEffectStatus.RUNNING)


def _guard() -> Any:
    """Migration 0015's constraint, as the model declares it."""
    return next(c for c in SideEffect._meta.constraints if c.name == "side_effect_key_unique")


def _migrate_0015() -> None:
    """What migration 0015 does forwards: its merge, then its constraint. Run on the latest
    schema, not by migrating back to 0014: the code the test writes the old records with
    (the append path, resolutions) is today's, and reads today's columns."""
    with connection.schema_editor() as editor:
        MIGRATION_0015.merge_duplicate_keys(django_apps, editor)
        editor.add_constraint(SideEffect, _guard())


def _unmigrate_0015() -> None:
    """What migration 0015 does backwards: it removes the constraint only."""
    with connection.schema_editor() as editor:
        editor.remove_constraint(SideEffect, _guard())


@pytest.fixture
def before_the_constraint(transactional_db: Any) -> Iterator[None]:
    """The database as it was before 0015 for the test's body: the constraint removed; put
    back after it (the schema outlives the test's rows)."""
    _unmigrate_0015()
    try:
        yield
    finally:
        SideEffect.objects.all().delete()
        with connection.schema_editor() as editor:
            names = connection.introspection.get_constraints(
                connection.cursor(), SideEffect._meta.db_table
            )
            if "side_effect_key_unique" not in names:
                editor.add_constraint(SideEffect, _guard())


def test_the_migration_merges_records_written_before_the_guard(
    before_the_constraint: None, workspace: Any
) -> None:
    thread = f.make_thread(workspace, external_id="old")
    f.append(
        thread,
        f.call("c1", "refund", side_effect_key=KEY),
        f.result("c1", "timeout"),
        f.call("c2", "refund", side_effect_key=KEY),
        f.call("c3", "refund", side_effect_key=KEY),
        f.result("c3", "succeeded"),
        f.call("d1", "email", side_effect_key="email-1"),
    )
    events = _log(thread)
    kept = SideEffect.objects.get(thread=thread, idempotency_key=KEY)
    assert (kept.call_seq, kept.status) == (1, SideEffectStatus.UNKNOWN)
    # What every call made before the guard: its own record.
    second = _record(thread, events[2], status=SideEffectStatus.RUNNING)
    third = _record(thread, events[3], status=SideEffectStatus.SUCCEEDED, result_seq=5)
    resolution = side_effect_resolve(
        side_effect=second, actor=None, status="failed", evidence="the shop says no refund"
    )
    log_before = list(Event.objects.filter(thread=thread).values_list("seq", "hash"))

    _migrate_0015()

    assert list(SideEffect.objects.filter(thread=thread, idempotency_key=KEY)) == [kept]
    kept.refresh_from_db()
    # The resolution made on a merged record settles the key's record, as with one record.
    assert kept.status == SideEffectStatus.FAILED
    assert SideEffect.objects.filter(thread=thread, idempotency_key="email-1").count() == 1
    assert list(Event.objects.filter(thread=thread).values_list("seq", "hash")) == log_before
    merges = {
        e.target_id: e for e in AuditEntry.objects.filter(action="side_effect.merge", thread=thread)
    }
    assert set(merges) == {str(second.pk), str(third.pk), str(kept.pk)}
    merged_third: Any = merges[str(third.pk)].before
    assert (merged_third["status"], merged_third["call_seq"], merged_third["result_seq"]) == (
        "succeeded",
        4,
        5,
    )
    assert merged_third["call_event_id"] == events[3].pk
    assert merges[str(second.pk)].after == {"merged_into": kept.pk, "call_seq": 1}
    assert merges[str(kept.pk)].before == {"status": "unknown"}
    assert merges[str(kept.pk)].after == {"status": "failed", "resolution_seq": resolution.seq}
    with pytest.raises(IntegrityError):
        _record(thread, events[2])

    _unmigrate_0015()  # going back drops the constraint only
    _record(thread, events[2])
    assert SideEffect.objects.filter(thread=thread, idempotency_key=KEY).count() == 2
