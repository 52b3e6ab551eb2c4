"""Folds racing each other and appends racing folds, with real threads on PostgreSQL.

The deterministic interleavings (prepare, prepare, commit, commit) are in
tests/services/test_folding.py; here the database's own locking decides the order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, connections

from tests import factories as f
from tests.scenarios import seeds
from threads.models import Checkpoint, Event, SummaryPhase, SummaryVersion, Thread
from threads.services import folding

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

MANUAL = {"kind": "manual", "reason": "race"}


@pytest.fixture(autouse=True)
def _postgres_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("real concurrent writers need PostgreSQL (SQLite serialises the database)")


def _in_threads(*targets: Callable[[], Any]) -> list[Any]:
    results: list[Any] = [None] * len(targets)
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(targets))

    def run(index: int, target: Callable[[], Any]) -> None:
        try:
            barrier.wait()
            results[index] = target()
        except BaseException as exc:  # noqa: BLE001 - reported to the test below
            errors.append(exc)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=run, args=(i, t)) for i, t in enumerate(targets)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert not errors, errors
    return results


def _committed_chain(thread: Thread) -> list[SummaryVersion]:
    committed = list(
        SummaryVersion.objects.filter(thread=thread, phase=SummaryPhase.COMMITTED).order_by(
            "version"
        )
    )
    previous_version, previous_until = 0, 0
    for version in committed:
        # Each commit stands on the one before it and continues exactly where it stopped.
        assert version.base_version == previous_version
        assert version.covered_from == previous_until + 1
        previous_version, previous_until = version.version, version.covered_until
    return committed


def test_racing_folds_commit_once(workspace: Any) -> None:
    thread = f.make_thread(workspace, "race")
    seeds.routine_units(thread, 20)
    _in_threads(*[lambda: folding.fold_run(thread_id=thread.pk, trigger=MANUAL)] * 4)
    thread.refresh_from_db()
    [winner] = _committed_chain(thread)
    assert (thread.head_version, thread.covered_until) == (winner.version, 80)
    versions = list(SummaryVersion.objects.filter(thread=thread).values_list("version", flat=True))
    assert len(versions) == len(set(versions))  # every row its own number
    others = SummaryVersion.objects.filter(thread=thread).exclude(pk=winner.pk)
    assert {v.phase for v in others} <= {SummaryPhase.DISCARDED}
    assert Checkpoint.objects.filter(thread=thread).count() == 1


def test_appends_during_folds_are_never_lost_or_counted_twice(workspace: Any) -> None:
    thread = f.make_thread(workspace, "busy")
    seeds.routine_units(thread, 2)
    done = threading.Event()

    def append() -> None:
        try:
            seeds.routine_units(thread, 40, start=2)
        finally:
            done.set()

    def fold_until_done() -> int:
        folds = 0
        while not done.is_set():
            if folding.fold_run(thread_id=thread.pk, trigger=MANUAL) is not None:
                folds += 1
        return folds

    _in_threads(append, fold_until_done, fold_until_done)
    folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    thread.refresh_from_db()
    committed = _committed_chain(thread)
    assert len(committed) >= 2
    assert thread.covered_until == thread.last_seq == 168
    total = sum(Event.objects.filter(thread=thread).values_list("token_count", flat=True))
    assert sum(v.tokens_replaced for v in committed) == total
    assert not SummaryVersion.objects.filter(thread=thread, phase=SummaryPhase.PREPARED)
