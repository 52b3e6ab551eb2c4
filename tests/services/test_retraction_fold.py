"""Retraction and reset in the fold pipeline (docs/pipeline.md, "Triggers" and
"Rolling fold, verification, atomic commit"): a retraction of a summarised event triggers a fold
that rebuilds the content without it; the world (side effects, approvals) is never retracted."""

from __future__ import annotations

from typing import Any

import pytest

from tests import factories as f
from threads.models import (
    ApprovalStatus,
    SideEffect,
    SideEffectStatus,
    SummaryPhase,
    SummaryVersion,
    Thread,
)
from threads.selectors import working_context
from threads.services import fold_verification, folding, triggers

pytestmark = pytest.mark.django_db

MANUAL = {"kind": "manual", "reason": "test"}
SECRET = "my card number is 4111 1111 1111 1111"


@pytest.fixture
def eager() -> Any:
    from ctxadmin.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


def _head(thread: Thread) -> SummaryVersion:
    thread.refresh_from_db()
    return SummaryVersion.objects.get(thread=thread, version=thread.head_version)


def test_a_retraction_of_a_summarised_event_is_a_structural_trigger(thread: Thread) -> None:
    f.append(thread, f.user(SECRET), f.assistant("noted"), f.user("next"))
    folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    thread.refresh_from_db()
    assert thread.covered_until == 3
    [pop] = f.append(thread, {"kind": "retraction", "retracts": 1})
    assert triggers.event_triggers(thread=thread, events=[pop]) == [
        ("structural", "retraction of a summarised event #1 (seq 4)")
    ]
    # A retraction of an event after the head's range changes only the working context.
    f.append(thread, f.assistant("later"))
    [late] = f.append(thread, {"kind": "retraction", "retracts": 5})
    assert triggers.event_triggers(thread=thread, events=[late]) == []


def test_the_fold_it_triggers_rebuilds_the_summary_without_the_retracted_text(
    thread: Thread, eager: Any, django_capture_on_commit_callbacks: Any
) -> None:
    f.append(thread, f.user(SECRET), f.assistant("noted"), f.user("ship order 7"))
    folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    first = _head(thread)
    assert "4111" in first.rendered
    with django_capture_on_commit_callbacks(execute=True):
        f.append(thread, {"kind": "retraction", "retracts": 1})
    head = _head(thread)
    assert head.version > first.version and head.phase == SummaryPhase.COMMITTED
    assert head.trigger["kind"] == "structural"
    assert "retraction of a summarised event #1" in head.trigger["reason"]
    assert head.covered_from == 1 and head.covered_until == 4  # rebuilt from the start
    assert head.verification["ok"] is True
    assert "4111" not in head.rendered and "4111" not in str(head.content)
    assert [r["text"] for r in head.content["requests"]] == ["ship order 7"]
    # Verifying it again (as recovery would) gives the same verdict.
    assert fold_verification.summary_verify(version=head).ok
    answer = working_context(thread=thread, overrides={})
    assert answer["summary"]["version"] == head.version
    assert "4111" not in answer["summary"]["rendered"] and answer["events"] == []


def test_a_rebuild_starts_at_the_last_reset_and_keeps_the_side_effects_before_it(
    thread: Thread, eager: Any, django_capture_on_commit_callbacks: Any
) -> None:
    f.append(
        thread,
        f.user("refund 30 EUR"),  # 1
        f.call("r1", "refund", {"amount": 30}, side_effect_key="refund-1"),  # 2
        f.result("r1", status="timeout"),  # 3
        {"kind": "approval_request", "action": "issue credit", "arguments": {}},  # 4
        {"kind": "reset"},  # 5
        f.user(SECRET),  # 6
        f.assistant("noted"),  # 7
    )
    folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert "4111" in _head(thread).rendered
    with django_capture_on_commit_callbacks(execute=True):
        f.append(thread, {"kind": "retraction", "retracts": 6})
    head = _head(thread)
    assert head.covered_from == 6 and head.covered_until == 8  # from the reset on
    assert head.verification["ok"] is True
    assert "4111" not in head.rendered and head.content["requests"] == []
    [refund] = head.content["tool_state"]
    assert (refund["tool_call_id"], refund["status"]) == ("r1", "unknown")
    assert {p["kind"] for p in head.content["pending"]} == {"side_effect", "approval"}
    effect = SideEffect.objects.get(thread=thread)
    assert effect.status == SideEffectStatus.UNKNOWN
    assert thread.approvals.get().status == ApprovalStatus.PENDING


def test_side_effects_and_approvals_are_unchanged_by_a_reset_and_a_fold(thread: Thread) -> None:
    f.append(
        thread,
        f.user("refund"),
        f.call("r1", "refund", {}, side_effect_key="refund-1"),
        f.result("r1", status="timeout"),
        {"kind": "approval_request", "action": "issue credit", "arguments": {}},
    )
    before = list(SideEffect.objects.filter(thread=thread).values("status", "call_seq"))
    f.append(thread, {"kind": "retraction", "retracts": 2}, {"kind": "reset"})
    folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert list(SideEffect.objects.filter(thread=thread).values("status", "call_seq")) == before
    assert thread.approvals.get().status == ApprovalStatus.PENDING
    head = _head(thread)
    assert head.verification["ok"] is True
    assert head.content["requests"] == []
    assert [t["status"] for t in head.content["tool_state"]] == ["unknown"]


def test_a_resolution_of_a_retracted_refund_is_never_a_completed_action(thread: Thread) -> None:
    """An operator resolves a side effect whose call was retracted before the head: the
    resolution goes with its call (retracted), so the next fold rebuilds from before the call
    and, as a fold of the whole log would, keeps the refund in the tool state (the world) and
    out of the completed actions (the content)."""
    from threads.domain.fold import fold_structured
    from threads.selectors import event_dicts
    from threads.services.side_effects import side_effect_resolve

    f.append(
        thread,
        f.user("refund 30 EUR"),  # 1
        f.call("r1", "refund", {"amount": 30}, side_effect_key="refund-1"),  # 2
        f.result("r1", status="timeout"),  # 3
        {"kind": "retraction", "retracts": 2},  # 4
        f.user("never mind, ship order 7"),  # 5
        f.assistant("shipping"),  # 6
    )
    folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert _head(thread).covered_until == 6
    side_effect_resolve(
        side_effect=SideEffect.objects.get(thread=thread),
        actor=None,
        status="succeeded",
        evidence="the bank says it went through",
        actor_label="status check",
    )  # 7
    f.append(thread, f.user("thanks"))  # 8
    folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    head = _head(thread)
    assert head.covered_until == 8 and head.verification["ok"] is True
    assert head.content["completed_actions"] == []
    [refund] = head.content["tool_state"]
    assert (refund["tool_call_id"], refund["status"]) == ("r1", "succeeded")
    assert head.covered_from == 1  # rebuilt from before the call
    at_once = fold_structured(
        previous=None, events=event_dicts(thread, after=0, until=8), covered_from=1, covered_until=8
    )
    assert head.content == at_once
