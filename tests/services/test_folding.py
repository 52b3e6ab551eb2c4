"""The fold pipeline: prepare → verify → commit by compare-and-swap (docs/pipeline.md,
"Rolling fold, verification, atomic commit")."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests import factories as f
from threads.models import Checkpoint, Event, SummaryPhase, SummaryVersion, Thread
from threads.services import checkpoints, fold_preparation, fold_recovery, folding
from threads.services.integrity import checkpoint_checksum, summary_checksum

pytestmark = pytest.mark.django_db

MANUAL = {"kind": "manual", "reason": "test"}


def _unit(thread: Thread, n: int, *, tool: bool = True) -> None:
    bodies: list[dict[str, Any]] = [f.user(f"question {n}")]
    if tool:
        bodies += [f.call(f"c{n}", "lookup", {"n": n}), f.result(f"c{n}", value={"n": n})]
    bodies.append(f.assistant(f"answer {n}"))
    f.append(thread, *bodies)


def _head(thread: Thread) -> tuple[int, int]:
    thread.refresh_from_db()
    return thread.head_version, thread.covered_until


def test_first_fold_commits_version_checkpoint_and_head(thread: Thread) -> None:
    for n in range(3):
        _unit(thread, n)
    version = folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert version is not None and version.phase == SummaryPhase.COMMITTED
    assert _head(thread) == (version.version, 12)
    assert (version.covered_from, version.covered_until) == (1, 12)
    assert version.verification["ok"] is True
    assert {c["name"] for c in version.verification["checks"]} >= {
        "schema",
        "chain_hash",
        "cursor_continuity",
        "checksum",
    }
    assert version.chain_hash == Event.objects.get(thread=thread, seq=12).hash
    assert version.checksum == summary_checksum(version)
    assert version.tokens > 0 and version.rendered
    assert version.tokens_replaced == sum(
        Event.objects.filter(thread=thread).values_list("token_count", flat=True)
    )
    assert version.trigger == MANUAL
    checkpoint = Checkpoint.objects.get(summary_version=version)
    assert checkpoint.cursor == 12 and checkpoint.chain_hash == version.chain_hash
    assert checkpoint.summary_checksum == version.checksum
    assert checkpoint.checksum == checkpoint_checksum(checkpoint)


def test_nothing_new_to_fold_is_a_noop(thread: Thread) -> None:
    assert folding.fold_run(thread_id=thread.pk, trigger=MANUAL) is None
    _unit(thread, 1)
    assert folding.fold_run(thread_id=thread.pk, trigger=MANUAL) is not None
    assert folding.fold_run(thread_id=thread.pk, trigger=MANUAL) is None
    assert SummaryVersion.objects.filter(thread=thread).count() == 1


def test_open_unit_is_never_folded(thread: Thread) -> None:
    _unit(thread, 1)
    f.append(thread, f.user("refund please"), f.call("r1", "refund", {"order": 7}, "refund-7"))
    version = folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert version is not None and version.covered_until == 4
    # The open call closes: the next fold takes the rest.
    f.append(thread, f.result("r1", value="ok"), f.assistant("done"))
    second = folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert second is not None and (second.covered_from, second.covered_until) == (5, 8)
    assert second.base_version == version.version


def test_rolling_fold_equals_one_fold_of_everything(workspace: Any) -> None:
    rolling = f.make_thread(workspace, "rolling")
    whole = f.make_thread(workspace, "whole")
    for n in range(4):
        _unit(rolling, n)
        _unit(whole, n)
        folding.fold_run(thread_id=rolling.pk, trigger=MANUAL)
    last = folding.fold_run(thread_id=whole.pk, trigger=MANUAL)
    head = SummaryVersion.objects.get(thread=rolling, version=_head(rolling)[0])
    assert last is not None
    assert head.content["facts"] == last.content["facts"]
    assert head.content["tool_state"] == last.content["tool_state"]
    assert head.covered_until == last.covered_until == 16


def test_events_appended_between_prepare_and_commit_stay_after_the_boundary(
    thread: Thread,
) -> None:
    _unit(thread, 1)
    prepared = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
    assert prepared is not None and prepared.phase == SummaryPhase.PREPARED
    _unit(thread, 2)  # arrives while the fold is in flight
    assert folding.summary_decide(version=prepared) == folding.Outcome.COMMITTED
    assert _head(thread) == (prepared.version, 4)
    nxt = folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert nxt is not None and (nxt.covered_from, nxt.covered_until) == (5, 8)
    # Every event is folded exactly once across the versions.
    folded = [
        (v.covered_from, v.covered_until)
        for v in SummaryVersion.objects.filter(thread=thread, phase="committed").order_by("version")
    ]
    assert folded == [(1, 4), (5, 8)]
    total = sum(Event.objects.filter(thread=thread).values_list("token_count", flat=True))
    assert prepared.tokens_replaced + nxt.tokens_replaced == total


def test_racing_folds_one_commit_the_other_discarded(thread: Thread) -> None:
    _unit(thread, 1)
    first = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
    second = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
    assert first is not None and second is not None
    assert second.version == first.version + 1  # every row its own number
    assert folding.summary_decide(version=second) == folding.Outcome.COMMITTED
    assert folding.summary_decide(version=first) == folding.Outcome.DISCARDED
    first.refresh_from_db()
    assert first.phase == SummaryPhase.DISCARDED
    assert _head(thread) == (second.version, 4)
    assert Checkpoint.objects.filter(thread=thread).count() == 1
    # Deciding again changes nothing.
    assert folding.summary_decide(version=second) == folding.Outcome.ALREADY_DECIDED


def test_lost_race_rebuilds_once_on_the_new_head(thread: Thread) -> None:
    _unit(thread, 1)
    stale = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
    assert stale is not None
    _unit(thread, 2)
    winner = folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert winner is not None and winner.covered_until == 8
    assert folding.summary_decide(version=stale) == folding.Outcome.DISCARDED
    # fold_once on a moved head: the rebuild finds nothing new and the head stays.
    assert folding.fold_run(thread_id=thread.pk, trigger=MANUAL) is None
    assert _head(thread) == (winner.version, 8)


def test_tampered_event_fails_verification_and_head_stays(thread: Thread) -> None:
    _unit(thread, 1)
    base = folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert base is not None
    _unit(thread, 2)
    prepared = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
    assert prepared is not None
    f.tamper(Event.objects.get(thread=thread, seq=6), arguments={"n": 99})
    assert folding.summary_decide(version=prepared) == folding.Outcome.REJECTED
    prepared.refresh_from_db()
    assert prepared.phase == SummaryPhase.REJECTED
    failed = [c["name"] for c in prepared.verification["checks"] if not c["ok"]]
    assert "chain_hash" in failed
    assert _head(thread) == (base.version, 4)


def test_changed_candidate_fails_its_checksum(thread: Thread) -> None:
    _unit(thread, 1)
    prepared = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
    assert prepared is not None
    content = {**prepared.content, "narrative": "edited behind the pipeline's back"}
    SummaryVersion.objects.filter(pk=prepared.pk).update(content=content)
    prepared.refresh_from_db()
    assert folding.summary_decide(version=prepared) == folding.Outcome.REJECTED
    assert _head(thread) == (0, 0)


def test_recover_commits_a_stale_candidate_still_on_its_head(thread: Thread) -> None:
    _unit(thread, 1)
    prepared = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
    assert prepared is not None
    assert fold_recovery.recover_prepared(older_than=timedelta(minutes=5)) == []  # still young
    decided = fold_recovery.recover_prepared(older_than=timedelta(0))
    assert [v.pk for v in decided] == [prepared.pk]
    prepared.refresh_from_db()
    assert prepared.phase == SummaryPhase.COMMITTED
    assert _head(thread) == (prepared.version, 4)


def test_recover_discards_a_stale_candidate_whose_head_moved(thread: Thread) -> None:
    _unit(thread, 1)
    orphan = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
    winner = folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert orphan is not None and winner is not None
    fold_recovery.recover_prepared(older_than=timedelta(0))
    orphan.refresh_from_db()
    assert orphan.phase == SummaryPhase.DISCARDED
    assert _head(thread) == (winner.version, 4)


def test_redelivered_task_finishes_its_own_candidate(thread: Thread) -> None:
    _unit(thread, 1)
    prepared = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL, task_id="t-1")
    assert prepared is not None
    again = folding.fold_run(thread_id=thread.pk, trigger=MANUAL, task_id="t-1")
    assert again is not None and again.pk == prepared.pk
    assert again.phase == SummaryPhase.COMMITTED
    assert SummaryVersion.objects.filter(thread=thread).count() == 1


def test_pending_at_the_cursor(thread: Thread) -> None:
    f.append(
        thread,
        f.user("refund"),
        f.call("r", "refund", {}, "k-1"),
        f.result("r", "timeout"),
        f.assistant("unsure"),
        {"kind": "approval_request", "action": "send email", "arguments": {}},
    )
    version = folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert version is not None
    pending = Checkpoint.objects.get(summary_version=version).pending
    assert [(p["kind"], p.get("status")) for p in pending] == [
        ("side_effect", "unknown"),
        ("approval", None),
    ]
    assert checkpoints.pending_at(thread=thread, cursor=2)[0]["status"] == "running"


def test_versions_only_increase(thread: Thread) -> None:
    numbers = []
    for n in range(3):
        _unit(thread, n)
        a = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
        assert a is not None
        numbers.append(a.version)
        folding.summary_decide(version=a)
    assert numbers == sorted(set(numbers))
    thread.refresh_from_db()
    assert thread.last_version == numbers[-1]


def test_pending_from_the_last_checkpoint_equals_a_replay_from_the_start(
    thread: Thread, workspace: Any
) -> None:
    from threads.models import ApprovalRequest, SideEffect
    from threads.services.approvals import approval_decide
    from threads.services.side_effects import side_effect_resolve

    reviewer = f.make_person(workspace, "rita", "reviewer")
    f.append(
        thread,
        f.user("a"),
        f.call("s1", "pay", {}, "k1"),
        f.result("s1", "timeout"),
        f.call("s2", "ship", {}, "k2"),
        f.result("s2"),
        {"kind": "approval_request", "action": "refund", "arguments": {}},
    )
    folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    f.append(
        thread,
        f.user("b"),
        f.call("s3", "mail", {}, "k3"),
        f.result("s3", "timeout"),
        {"kind": "approval_request", "action": "email", "arguments": {}},
    )
    folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    side_effect_resolve(
        side_effect=SideEffect.objects.get(tool_call_id="s1"),
        actor=reviewer,
        status="failed",
        evidence="ledger shows no payment",
    )
    approval_decide(
        approval=ApprovalRequest.objects.get(action="refund"),
        actor=reviewer,
        decision="approve",
        reason="fine",
    )
    f.append(thread, f.user("c"), f.call("s4", "pay", {}, "k4"))
    folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    thread.refresh_from_db()
    for cursor in range(thread.last_seq + 1):
        assert checkpoints.pending_at(thread=thread, cursor=cursor) == checkpoints.pending_at(
            thread=thread, cursor=cursor, from_checkpoint=False
        ), cursor
    final = checkpoints.pending_at(thread=thread, cursor=thread.last_seq)
    assert [
        (p["kind"], p.get("tool_call_id") or p.get("action"), p.get("status")) for p in final
    ] == [
        ("side_effect", "s3", "unknown"),
        ("side_effect", "s4", "running"),
        ("approval", "email", None),
    ]


def test_a_long_backlog_folds_in_capped_steps(
    thread: Thread, monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from ctxadmin.celery import app

    monkeypatch.setattr(fold_preparation, "FOLD_MAX_EVENTS", 8)
    for n in range(5):
        _unit(thread, n)
    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True  # the follow-up folds run in this process
    try:
        with django_capture_on_commit_callbacks(execute=True):
            first = folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    finally:
        app.conf.task_always_eager = eager
    assert first is not None and first.covered_until == 8
    ranges = [
        (v.covered_from, v.covered_until, v.trigger["kind"])
        for v in SummaryVersion.objects.filter(thread=thread).order_by("version")
    ]
    assert ranges == [(1, 8, "manual"), (9, 16, "manual"), (17, 20, "manual")]
    assert _head(thread)[1] == 20
