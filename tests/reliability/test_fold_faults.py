"""Folds under faults (docs/reliability.md, "Folds under faults"; docs/pipeline.md,
"Commit atomically" and "Recovery").

tests/services/test_folding.py covers one redelivery finishing its own candidate, two folds
racing, and `recover` on a stale candidate; tests/worker/test_fold_worker.py kills a real
worker between prepare and commit. Here, on both databases:

- the same fold task delivered 1,000 times, eight at a time, while the log grows: exactly one
  committed version per parent (no fork), version numbers and coverage only increase, every
  delivery's task run ends in success;
- a fold whose message the broker lost (a worker killed between taking it and recording it,
  a Redis restart under a blocking pop): `recover` requests it again once its in-flight
  marker is older than CTXADMIN_PREPARED_TIMEOUT, and the lost run ends, superseded;
- a crash at each step of a fold (read, fold, prepared, verified, inside the commit's
  transaction, committed but not answered), then `recover` and the broker's redelivery of the
  same task: the state equals a from-scratch fold of the same events, checksum for checksum
  (docs/api.md, "Canonical forms and checksums").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from tests import factories as f
from threads import tasks
from threads.models import AuditEntry, Checkpoint, SummaryPhase, SummaryVersion, TaskRun, Thread
from threads.selectors import event_dicts
from threads.services import enqueue, fold_preparation, fold_requests, folding
from threads.services.integrity import integrity_check, summary_checksum
from threads.services.tasks import task_run_start
from threads.summarizers import get_summarizer

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # The test delivers the folds itself; appends must not start others.
    pytest.mark.usefixtures("no_fold_triggers"),
]

MANUAL = {"kind": "manual", "reason": "fault test"}
DELIVERIES = 1000
CONCURRENT = 8


class Crash(Exception):
    """The process died here."""


def _unit(thread: Thread, n: int) -> None:
    f.append(
        thread,
        f.user(f"question {n}"),
        f.call(f"c{n}", "lookup", {"n": n}),
        f.result(f"c{n}", value={"n": n}),
        f.assistant(f"answer {n}"),
    )


def _run(thread: Thread) -> TaskRun:
    return task_run_start(
        workspace=thread.workspace, thread=thread, kind="fold", send=lambda _: None
    )


def _deliver(thread: Thread, run: TaskRun) -> Any:
    """What a worker does with one delivery of the task's message."""
    return tasks.fold_thread_task.apply(args=(str(thread.pk), MANUAL), task_id=run.pk).get()


def from_scratch_checksum(thread: Thread) -> str:
    """The checksum of one fold of the whole log from nothing, computed aside (no row)."""
    thread.refresh_from_db()
    events = event_dicts(thread, after=0, until=thread.last_seq)
    content = get_summarizer(thread.summarizer).fold(
        previous=None, events=events, covered_from=1, covered_until=thread.last_seq
    )
    reference = SummaryVersion(
        thread=thread,
        covered_from=1,
        covered_until=thread.last_seq,
        chain_hash=events[-1]["hash"],
        content=content,
    )
    return summary_checksum(reference)


def _committed(thread: Thread) -> list[SummaryVersion]:
    return list(
        SummaryVersion.objects.filter(thread=thread, phase=SummaryPhase.COMMITTED).order_by(
            "version"
        )
    )


def test_one_task_delivered_a_thousand_times_commits_each_version_once(workspace: Any) -> None:
    thread = f.make_thread(workspace, "redelivered")
    _unit(thread, 0)
    run = _run(thread)
    delivered = [0]
    answers: list[dict[str, Any]] = []
    errors: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        try:
            while True:
                with lock:
                    if delivered[0] >= DELIVERIES:
                        return
                    delivered[0] += 1
                    n = delivered[0]
                if n % 50 == 0:  # the log grows meanwhile: later deliveries find work
                    _unit(thread, n)
                answer = _deliver(thread, run)
                with lock:
                    answers.append(answer)
        except Exception as exc:
            with lock:
                errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            connection.close()

    workers = [threading.Thread(target=worker) for _ in range(CONCURRENT)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    assert len(answers) == DELIVERIES
    _deliver(thread, run)  # the last delivery, after every append, folds what is left

    thread.refresh_from_db()
    committed = _committed(thread)
    bases = [v.base_version for v in committed]
    assert len(bases) == len(set(bases)), "two committed versions on one parent: a fork"
    # A line: each committed version stands on the one committed before it.
    assert bases == [0, *[v.version for v in committed[:-1]]]
    assert [v.covered_until for v in committed] == sorted({v.covered_until for v in committed})
    assert thread.head_version == committed[-1].version
    assert thread.covered_until == thread.last_seq == 4 * (1 + DELIVERIES // 50)
    assert all(v.verification["ok"] for v in committed)
    assert not SummaryVersion.objects.filter(thread=thread, phase=SummaryPhase.PREPARED).exists()
    # Each committed version has its checkpoint and its audit line, once.
    checkpoints = Checkpoint.objects.filter(thread=thread, summary_version__in=committed)
    assert checkpoints.count() == len(committed)
    assert AuditEntry.objects.filter(thread=thread, action="summary_committed").count() == len(
        committed
    )
    assert TaskRun.objects.get(pk=run.pk).state == "SUCCESS"
    assert integrity_check(thread=thread, full=True).ok


def _crash(target: Any, name: str) -> Callable[[pytest.MonkeyPatch], None]:
    def install(monkeypatch: pytest.MonkeyPatch) -> None:
        def crashed(*args: Any, **kwargs: Any) -> Any:
            raise Crash(name)

        monkeypatch.setattr(target, name, crashed)

    return install


def _crash_after(target: Any, name: str) -> Callable[[pytest.MonkeyPatch], None]:
    """The step runs to its end; the process dies right after."""

    def install(monkeypatch: pytest.MonkeyPatch) -> None:
        real = getattr(target, name)

        def crashed(*args: Any, **kwargs: Any) -> Any:
            real(*args, **kwargs)
            raise Crash(f"after {name}")

        monkeypatch.setattr(target, name, crashed)

    return install


# Each step of docs/pipeline.md, "Read the head and fix the boundary",
# "Fold with a summariser backend", "Store as prepared", "Verify" and "Commit atomically", at its
# edge: the name says what had happened.
CRASHES = {
    "reading the head": _crash(fold_preparation, "_head"),
    "reading the events": _crash(fold_preparation, "event_dicts_for_fold"),
    "folded, not yet stored": _crash(fold_preparation, "render_summary"),
    "prepared, not yet verified": _crash(folding, "summary_verify"),
    "verified, not yet committed": _crash(folding, "summary_commit"),
    "inside the commit, after the head moved": _crash(folding, "checkpoint_record"),
    "inside the commit, at its audit line": _crash_after(folding, "checkpoint_record"),
    "committed, not yet answered": _crash(folding, "_follow_up"),
    "answered, not yet acknowledged": _crash(tasks, "_fold_answer"),
}


@pytest.mark.parametrize("point", list(CRASHES))
def test_a_crash_at_each_step_then_recover_equals_a_fold_from_scratch(
    point: str, workspace: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread = f.make_thread(workspace, "crashing")
    for n in range(3):
        _unit(thread, n)
    run = _run(thread)
    with monkeypatch.context() as patch:
        CRASHES[point](patch)
        with pytest.raises(Crash):
            _deliver(thread, run)

    # Whatever the crash left, the head is consistent: a committed version exists only with
    # its checkpoint and the head pointing at it.
    thread.refresh_from_db()
    for version in _committed(thread):
        assert Checkpoint.objects.filter(summary_version=version).count() == 1
    assert thread.head_version in (0, *[v.version for v in _committed(thread)])

    call_command("recover", "--older-than", "0")
    _deliver(thread, run)  # the broker delivers the unacknowledged message again

    thread.refresh_from_db()
    committed = _committed(thread)
    assert len(committed) == 1, [(v.version, v.phase) for v in committed]
    head = committed[0]
    assert thread.head_version == head.version
    assert thread.covered_until == thread.last_seq == 12
    assert head.checksum == summary_checksum(head) == from_scratch_checksum(thread)
    assert not SummaryVersion.objects.filter(thread=thread, phase=SummaryPhase.PREPARED).exists()
    assert Checkpoint.objects.filter(summary_version=head).count() == 1
    assert AuditEntry.objects.filter(thread=thread, action="summary_committed").count() == 1
    assert TaskRun.objects.get(pk=run.pk).state == "SUCCESS"
    assert integrity_check(thread=thread, full=True).ok
    thread.refresh_from_db()
    assert thread.fold_task_id == ""


def test_a_fold_whose_message_was_lost_is_requested_again_by_recover(
    workspace: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread = f.make_thread(workspace, "lost-message")
    for n in range(3):
        _unit(thread, n)
    with monkeypatch.context() as patch:
        patch.setattr(enqueue, "task_send", lambda *args, **kwargs: None)  # never arrives
        lost = fold_requests.fold_request(thread=thread, trigger=MANUAL)
    # While it is fresh, asking again answers the same run: one fold in flight per thread.
    assert fold_requests.fold_request(thread=thread, trigger=MANUAL).pk == lost.pk
    stale = timezone.now() - settings.CTXADMIN_PREPARED_TIMEOUT - timedelta(seconds=1)
    Thread.objects.filter(pk=thread.pk).update(fold_requested_at=stale)

    call_command("recover")
    lost.refresh_from_db()
    assert lost.state == "SUCCESS" and lost.result is not None
    assert lost.result["folded"] is False
    successor = TaskRun.objects.get(pk=lost.result["superseded_by"])
    deadline = time.monotonic() + 60  # eager on SQLite; the real worker on PostgreSQL
    while successor.state not in ("SUCCESS", "FAILURE"):
        assert time.monotonic() < deadline, successor.state
        time.sleep(0.2)
        successor.refresh_from_db()
    assert successor.state == "SUCCESS", successor.result
    thread.refresh_from_db()
    assert thread.covered_until == thread.last_seq == 12
    (head,) = _committed(thread)
    assert head.checksum == from_scratch_checksum(thread)


def test_a_run_whose_worker_died_after_the_fold_is_ended_by_recover(workspace: Any) -> None:
    """The fold committed and cleared the thread's marker; the worker died before the run's
    end was recorded, and its message is not coming back soon (the broker's visibility
    timeout): `recover` ends the run with what it did."""
    thread = f.make_thread(workspace, "orphaned")
    for n in range(3):
        _unit(thread, n)
    run = _run(thread)
    folded = folding.fold_run(thread_id=thread.pk, trigger=MANUAL, task_id=run.pk)
    assert folded is not None and folded.phase == SummaryPhase.COMMITTED
    old = timezone.now() - settings.CTXADMIN_PREPARED_TIMEOUT - timedelta(seconds=1)
    TaskRun.objects.filter(pk=run.pk).update(state="STARTED", created_at=old)
    young = _run(thread)  # queued a moment ago: left alone
    TaskRun.objects.filter(pk=young.pk).update(state="PENDING")

    call_command("recover")
    run.refresh_from_db()
    assert run.state == "SUCCESS" and run.result is not None
    assert run.result["folded"] is True and run.result["version"] == folded.version
    assert run.result["recovered"] is True
    assert TaskRun.objects.get(pk=young.pk).state == "PENDING"


def test_a_fold_asked_for_a_thread_retention_deleted_ends_quietly() -> None:
    """The fold was queued, then retention deleted the thread before a worker took it: the task
    answers that there is nothing to fold (no error, nothing to retry) and writes no row."""
    from threads.services.retention import retention_apply, workspace_retention_update

    thread = f.make_thread(f.make_workspace("gone")[0], external_id="old-ticket")
    _unit(thread, 1)
    run = _run(thread)
    workspace_retention_update(
        workspace=thread.workspace, actor_label="test", retention_days=30, keep_checkpoints=None
    )
    [outcome] = retention_apply(workspace_name="gone", now=timezone.now() + timedelta(days=90))
    assert [line["external_id"] for line in outcome.threads] == ["old-ticket"]

    answer = _deliver(thread, run)

    assert answer == {"folded": False, "reason": "the thread no longer exists"}
    assert not Thread.objects.filter(pk=thread.pk).exists()
    assert not SummaryVersion.objects.filter(thread_id=thread.pk).exists()
