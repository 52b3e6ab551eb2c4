"""Retraction and reset: validation (docs/api.md, "Append — `POST` (agents)") and what leaves the
working context (docs/api.md, "Working context — `GET /api/v1/threads/{id}/context/`",
docs/event-log.md, "Kinds")."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from tests.domain.eventlog import Log
from tests.domain.strategies import logs
from threads.domain.budget import Budget, plan_context
from threads.domain.errors import InvalidEvent
from threads.domain.events import normalize_event
from threads.domain.markers import MARKER_KINDS, withdrawn


def seqs(events: list[dict[str, Any]]) -> list[int]:
    return [e["seq"] for e in events]


def plan(log: Log, *, summary_tokens: int = 0, window: int = 100_000) -> Any:
    return plan_context(
        events=log.events, summary_tokens=summary_tokens, budget=Budget(window=window)
    )


def test_a_retraction_needs_a_positive_seq() -> None:
    ok = normalize_event({"kind": "retraction", "retracts": 3}, max_bytes=1000)
    assert ok.data == {"retracts": 3}
    cases: list[tuple[dict[str, Any], str | None]] = [
        ({}, "this field is required"),
        ({"retracts": 0}, "must be a positive seq number"),
        ({"retracts": "3"}, "must be a positive seq number"),
        ({"retracts": True}, "must be a positive seq number"),
        ({"retracts": 2, "reason": "x"}, None),
    ]
    for bad, why in cases:
        with pytest.raises(InvalidEvent) as caught:
            normalize_event({"kind": "retraction", **bad}, max_bytes=1000)
        if why:
            assert caught.value.fields == {"retracts": why}
        else:
            assert caught.value.fields == {"reason": "unknown field for a retraction event"}


def test_a_reset_has_no_fields() -> None:
    assert normalize_event({"kind": "reset"}, max_bytes=1000).data == {}
    with pytest.raises(InvalidEvent) as caught:
        normalize_event({"kind": "reset", "retracts": 1}, max_bytes=1000)
    assert caught.value.fields == {"retracts": "unknown field for a reset event"}


def test_a_retracted_item_and_the_marker_leave_the_context() -> None:
    log = Log()
    log.user("first", token_count=10)
    log.assistant("wrong", token_count=10)
    log.retract(2)
    log.assistant("right", token_count=10)
    result = plan(log, summary_tokens=7)
    assert seqs(result.events) == [1, 4]
    assert result.used == 27 and result.history == 27 and result.reset_at is None


@pytest.mark.parametrize("side", ["call", "result"])
def test_retracting_either_side_of_a_call_takes_the_pair_and_its_resolution(side: str) -> None:
    log = Log()
    log.user("refund", token_count=10)
    call = log.call("c1", "refund", side_effect=True)
    result = log.result("c1", "timeout")
    log.resolve(call["seq"], "succeeded")
    log.assistant("refunded", token_count=10)
    log.retract(call["seq"] if side == "call" else result["seq"])
    assert seqs(plan(log).events) == [1, 5]


def test_a_reset_takes_out_everything_before_it_and_the_summary() -> None:
    log = Log()
    log.user("old", token_count=10)
    log.call("c1")
    log.reset()
    log.result("c1")  # its call is gone: the result goes too, no half call
    log.user("new", token_count=10)
    result = plan(log, summary_tokens=50)
    assert seqs(result.events) == [5]
    assert result.reset_at == 3
    assert result.sections == {"summary": 0, "events": 10}
    gone = withdrawn(log.events)
    assert gone.seqs == {1, 2, 3, 4} and gone.reset_at == 3


def test_the_last_reset_wins_and_retractions_after_it_still_count() -> None:
    log = Log()
    log.user("a")
    log.reset()
    log.user("b")
    log.reset()
    log.user("c")
    log.assistant("d")
    log.retract(6)
    assert seqs(plan(log).events) == [5]
    assert plan(log).reset_at == 4


def test_an_unknown_side_effect_that_was_retracted_pins_nothing() -> None:
    log = Log()
    log.user("refund", token_count=400)
    log.call("c1", "refund", side_effect=True, token_count=400)
    log.result("c1", "timeout", token_count=400)
    log.retract(2)
    log.user("next", token_count=100)
    # Nothing of the retracted call is sent, so nothing of it is pinned either.
    result = plan(log, window=499)
    assert seqs(result.events) == [5]
    assert [(u["from_seq"], u["to_seq"]) for u in result.trimmed_units] == [(1, 1)]


@settings(max_examples=200, deadline=None)
@given(logs(max_ops=50, markers=True))
def test_the_context_never_holds_a_retracted_item_a_marker_or_half_a_call(log: Log) -> None:
    result = plan(log)
    sent = {e["seq"]: e for e in result.events}
    retracted = {e["retracts"] for e in log.events if e["kind"] == "retraction"}
    resets = [e["seq"] for e in log.events if e["kind"] == "reset"]
    assert not retracted & set(sent)
    assert all(e["kind"] not in MARKER_KINDS for e in sent.values())
    if resets:
        assert all(seq > resets[-1] for seq in sent)
        assert result.reset_at == resets[-1]
    for event in sent.values():
        if event["kind"] in ("tool_result", "side_effect_resolution"):
            assert event["call_seq"] in sent
    # Every call sent that has a result in the log has it sent too.
    answered = {e["call_seq"]: e["seq"] for e in log.events if e["kind"] == "tool_result"}
    for seq, event in sent.items():
        if event["kind"] == "tool_call" and seq in answered:
            assert answered[seq] in sent
