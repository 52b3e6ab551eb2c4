"""Each call the model reads has exactly one result (threads.domain.call_pairs), and a second
result never moves a call's status in the ledger replay (threads.domain.ledger)."""

from __future__ import annotations

from typing import Any

from threads.domain.call_pairs import pair_calls
from threads.domain.ledger import tool_state_from_log


def call(seq: int, call_id: str, side_effect: bool = True) -> dict[str, Any]:
    event: dict[str, Any] = {
        "seq": seq,
        "kind": "tool_call",
        "tool_call_id": call_id,
        "tool_name": "refund",
        "arguments": {},
    }
    if side_effect:
        event.update(side_effect=True, idempotency_key=f"k-{call_id}")
    return event


def result(seq: int, call_seq: int, status: str, **extra: Any) -> dict[str, Any]:
    return {
        "seq": seq,
        "kind": "tool_result",
        "tool_call_id": "c1",
        "call_seq": call_seq,
        "status": status,
        "result": status,
        **extra,
    }


def resolution(seq: int, call_seq: int, status: str) -> dict[str, Any]:
    return {
        "seq": seq,
        "kind": "side_effect_resolution",
        "tool_call_id": "c1",
        "call_seq": call_seq,
        "status": status,
        "evidence": "bank ref 1",
        "actor": "olga",
    }


def user(seq: int) -> dict[str, Any]:
    return {"seq": seq, "kind": "message", "role": "user", "content": "hello?"}


def test_a_second_result_leaves_the_status_and_the_context() -> None:
    log = [call(1, "c1"), result(2, 1, "timeout"), result(3, 1, "succeeded", duplicate_of=2)]
    [entry] = tool_state_from_log(previous=None, events=log)
    assert entry["status"] == "unknown" and entry["result_seq"] == 2
    paired = pair_calls(log)
    assert [e["seq"] for e in paired.events] == [1, 2]
    assert paired.unanswered == []


def test_a_resolution_stands_right_after_its_call() -> None:
    log = [call(1, "c1"), user(2), resolution(3, 1, "failed")]
    paired = pair_calls(log)
    assert [(e["kind"], e["seq"]) for e in paired.events] == [
        ("tool_call", 1),
        ("tool_result", 3),
        ("message", 2),
    ]
    built = paired.events[1]
    assert built["status"] == "failed" and built["from_resolution"] == 3
    assert built["result"]["evidence"] == "bank ref 1"


def test_a_resolution_after_a_result_stays_news() -> None:
    log = [call(1, "c1"), result(2, 1, "timeout"), resolution(3, 1, "succeeded")]
    assert [e["kind"] for e in pair_calls(log).events] == [
        "tool_call",
        "tool_result",
        "side_effect_resolution",
    ]


def test_calls_with_neither_are_named() -> None:
    paired = pair_calls([call(1, "c1"), call(2, "c2", side_effect=False)])
    assert [(c["seq"], c["side_effect"]) for c in paired.unanswered] == [(1, True), (2, False)]
    assert paired.unanswered[0]["idempotency_key"] == "k-c1"
