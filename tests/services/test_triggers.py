"""Fold triggers after appends (docs/pipeline.md, "Budget and triggers"): capacity, structural,
risk; one fold in flight."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests import factories as f
from threads.domain.events import normalize_event
from threads.models import SummaryPhase, SummaryVersion, TaskRun, Thread
from threads.services import fold_preparation, fold_requests, folding, triggers
from threads.services.event_rows import HOOK_CALL_SIDE_EFFECT
from threads.services.events import event_append_batch

pytestmark = pytest.mark.django_db


def _appended_versions(thread: Thread) -> list[SummaryVersion]:
    return list(SummaryVersion.objects.filter(thread=thread).order_by("version"))


def _append_and_run_hooks(
    django_capture_on_commit_callbacks: Any, thread: Thread, *bodies: dict[str, Any]
) -> None:
    # Hooks run after commit, and the fold task they enqueue runs eagerly after its own commit.
    with django_capture_on_commit_callbacks(execute=True):
        f.append(thread, *bodies)


@pytest.fixture
def eager(settings: Any) -> Any:
    from ctxadmin.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


def test_hook_is_installed() -> None:
    from threads.services.events import after_append_hooks

    assert after_append_hooks.count(triggers.after_append) == 1


def test_side_effect_closing_is_structural(thread: Thread) -> None:
    f.append(
        thread, f.user("change the address"), f.call("c1", "update_order", {"addr": "x"}, "order-1")
    )
    result = f.append(thread, f.result("c1", value="ok", request_id="req-9"))
    reasons = triggers.event_triggers(thread=thread, events=result)
    assert [k for k, _ in reasons] == ["structural"]
    assert "c1" in reasons[0][1]


def test_plain_tool_result_triggers_nothing(thread: Thread) -> None:
    f.append(thread, f.user("look it up"), f.call("c1", "lookup"))
    result = f.append(thread, f.result("c1", value="found"))
    assert triggers.event_triggers(thread=thread, events=result) == []
    assert triggers.choose_trigger([]) is None


def test_side_effect_timeout_is_risk(thread: Thread) -> None:
    f.append(thread, f.user("refund"), f.call("r1", "refund", {}, "refund-1"))
    result = f.append(thread, f.result("r1", "timeout"))
    reasons = triggers.event_triggers(thread=thread, events=result)
    assert [k for k, _ in reasons] == ["risk"]
    chosen = triggers.choose_trigger(reasons + [("capacity", "x")])
    assert chosen is not None and chosen["kind"] == "risk"


def test_an_appends_results_say_whether_their_calls_have_side_effects(
    thread: Thread, django_assert_num_queries: Any
) -> None:
    # What the hooks get from an append: a result's view says whether its call has a side
    # effect, so the triggers read no call; stored events, without that, are read back.
    f.append(
        thread, f.user("refund"), f.call("r1", "refund", {}, "refund-1"), f.call("l1", "lookup")
    )
    new = [
        normalize_event(b, max_bytes=1 << 20) for b in (f.result("r1", "timeout"), f.result("l1"))
    ]
    appended = event_append_batch(thread=thread, new_events=new)
    views = [a.row.hook_view() for a in appended if a.row is not None]
    assert [v[HOOK_CALL_SIDE_EFFECT] for v in views] == [True, False]
    with django_assert_num_queries(0):
        reasons = triggers.event_triggers(thread=thread, events=views)
    assert [k for k, _ in reasons] == ["risk"] and "r1" in reasons[0][1]
    assert triggers.event_triggers(thread=thread, events=[a.event for a in appended]) == reasons


def test_correction_is_structural(thread: Thread) -> None:
    events = f.append(
        thread, f.user("hi"), f.annotation("correction", "user", {"key": "city", "value": "Oslo"})
    )
    assert [k for k, _ in triggers.event_triggers(thread=thread, events=events)] == ["structural"]


def test_conflicting_tool_results_are_risk(thread: Thread) -> None:
    f.append(thread, f.user("check"), f.call("a", "lookup"), f.call("b", "lookup"))
    events = f.append(
        thread,
        f.result("a", verified_facts=[{"key": "balance", "value": 10}]),
        f.result("b", verified_facts=[{"key": "balance", "value": 12}]),
    )
    kinds = [k for k, _ in triggers.event_triggers(thread=thread, events=events)]
    assert kinds == ["risk"]


def test_tool_result_contradicting_the_summary_is_risk(thread: Thread) -> None:
    f.append(
        thread,
        f.user("check"),
        f.call("a", "lookup"),
        f.result("a", verified_facts=[{"key": "balance", "value": 10}]),
    )
    folding.fold_run(thread_id=thread.pk, trigger={"kind": "manual", "reason": "t"})
    thread.refresh_from_db()
    f.append(thread, f.user("again"), f.call("b", "lookup"))
    events = f.append(thread, f.result("b", verified_facts=[{"key": "balance", "value": 11}]))
    reasons = triggers.event_triggers(thread=thread, events=events)
    assert [k for k, _ in reasons] == ["risk"] and "balance" in reasons[0][1]


def test_capacity_uses_the_threads_own_budget(workspace: Any) -> None:
    small = f.make_thread(
        workspace, "small", context_window=400, reserved_output=0, safety_margin=0
    )
    f.append(small, f.user("a " * 100))
    assert triggers.capacity_trigger(thread=small) is None
    f.append(small, f.assistant("b " * 300))
    kind, reason = triggers.capacity_trigger(thread=small) or ("", "")
    assert kind == "capacity" and "400" in reason


def test_appends_fold_through_the_hook(
    thread: Thread, eager: Any, django_capture_on_commit_callbacks: Any
) -> None:
    _append_and_run_hooks(
        django_capture_on_commit_callbacks,
        thread,
        f.user("change the address"),
        f.call("c1", "update_order", {"addr": "x"}, "order-1"),
    )
    assert _appended_versions(thread) == []  # nothing structural yet, unit open
    _append_and_run_hooks(
        django_capture_on_commit_callbacks, thread, f.result("c1", value="ok", request_id="req-9")
    )
    versions = _appended_versions(thread)
    assert [v.phase for v in versions] == [SummaryPhase.COMMITTED]
    assert versions[0].trigger["kind"] == "structural"
    thread.refresh_from_db()
    assert thread.covered_until == 3 and thread.fold_task_id == ""
    run = TaskRun.objects.get(thread=thread, kind="fold")
    assert run.state == "SUCCESS" and run.result is not None
    assert run.result["version"] == versions[0].version


def test_one_fold_in_flight_per_thread(thread: Thread) -> None:
    trigger = {"kind": "manual", "reason": "t"}
    first = fold_requests.fold_request(thread=thread, trigger=trigger)
    second = fold_requests.fold_request(thread=thread, trigger=trigger)
    assert second.pk == first.pk
    assert TaskRun.objects.filter(thread=thread, kind="fold").count() == 1
    thread.refresh_from_db()
    assert thread.fold_task_id == first.pk


def test_stale_in_flight_fold_is_replaced(thread: Thread, settings: Any) -> None:
    trigger = {"kind": "manual", "reason": "t"}
    first = fold_requests.fold_request(thread=thread, trigger=trigger)
    Thread.objects.filter(pk=thread.pk).update(
        fold_requested_at=timezone.now() - settings.CTXADMIN_PREPARED_TIMEOUT - timedelta(seconds=1)
    )
    second = fold_requests.fold_request(thread=thread, trigger=trigger)
    assert second.pk != first.pk
    thread.refresh_from_db()
    assert thread.fold_task_id == second.pk


def test_enqueue_happens_only_after_commit(
    thread: Thread, eager: Any, django_capture_on_commit_callbacks: Any
) -> None:
    f.append(thread, f.user("hi"), f.assistant("hello"))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = fold_requests.fold_request(thread=thread, trigger={"kind": "manual", "reason": "t"})
    # Nothing ran inside the transaction: the task is only a pending run and a callback.
    assert len(callbacks) == 1
    assert TaskRun.objects.get(pk=run.pk).state == "PENDING"
    assert _appended_versions(thread) == []
    callbacks[0]()
    assert TaskRun.objects.get(pk=run.pk).state == "SUCCESS"
    assert [v.phase for v in _appended_versions(thread)] == [SummaryPhase.COMMITTED]


def test_history_of_a_long_backlog_is_bounded_without_summing(
    thread: Thread, django_assert_num_queries: Any
) -> None:
    for n in range(5):
        f.append(thread, f.user(f"hello {n} " * 20))
    thread.refresh_from_db()
    # Nothing folded yet: the thread's own token_total is the history, no query needed.
    with django_assert_num_queries(0):
        exact = triggers.history_tokens(thread=thread)
    assert exact == thread.token_total
    # More events than `enough` could hold at their minimum size: no query at all.
    with django_assert_num_queries(0):
        bounded = triggers.history_tokens(thread=thread, enough=10)
    assert 10 < bounded <= exact


def test_a_trigger_raised_during_a_fold_is_answered_after_it(
    thread: Thread, eager: Any, django_capture_on_commit_callbacks: Any
) -> None:
    f.append(thread, f.user("hi"), f.assistant("hello"))
    prepared = fold_preparation.fold_prepare(
        thread_id=thread.pk, trigger={"kind": "manual", "reason": "t"}
    )
    assert prepared is not None
    # While that fold is in flight a side effect completes; its trigger finds the fold busy.
    f.append(thread, f.user("ship it"), f.call("s", "ship", {}, "ship-1"), f.result("s"))
    with django_capture_on_commit_callbacks(execute=True):
        assert folding.summary_decide(version=prepared) == folding.Outcome.COMMITTED
        thread.refresh_from_db()
        folding._follow_up(
            thread.pk,
            {"kind": "manual", "reason": "t"},
            folding.FoldResult(prepared, folding.Outcome.COMMITTED),
        )
    versions = _appended_versions(thread)
    assert [(v.covered_until, v.trigger["kind"]) for v in versions] == [
        (2, "manual"),
        (5, "structural"),
    ]
