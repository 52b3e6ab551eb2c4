"""The structured fold: rules of docs/pipeline.md, "Fold with a summariser backend" and its rolling
/ determinism properties."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.domain.eventlog import Log
from tests.domain.strategies import logs
from threads.domain import fold as fold_module
from threads.domain.canonical import canonical_json
from threads.domain.fold import fold_structured
from threads.domain.ledger import pending_from_log, tool_state_from_log
from threads.domain.units import last_closed_boundary, split_units, unit_groups


def fold_all(log: Log, until: int | None = None) -> dict[str, Any]:
    until = log.last_seq if until is None else until
    return fold_structured(
        previous=None, events=log.events[:until], covered_from=1, covered_until=until
    )


def fold_rolling(log: Log, cuts: list[int]) -> dict[str, Any] | None:
    """Fold 1..cuts[0], then each (cuts[i-1], cuts[i]] on top of the previous content."""
    content: dict[str, Any] | None = None
    start = 0
    for cut in cuts:
        content = fold_structured(
            previous=content,
            events=log.events[start:cut],
            covered_from=start + 1,
            covered_until=cut,
        )
        start = cut
    return content


def boundaries(log: Log) -> list[int]:
    """Every place a fold may have stopped while the log grew: the fold boundary of each
    prefix of the log (a unit may grow after a fold covered it), and the ends of closed groups."""
    out = set()
    for group in unit_groups(split_units(log.events)):
        if not all(u.closed for u in group):
            break
        out.add(group[-1].to_seq)
    for length in range(1, log.last_seq + 1):
        out.add(last_closed_boundary(split_units(log.events[:length])))
    return sorted(out - {0})


def active(content: dict[str, Any], key: str) -> list[dict[str, Any]]:
    return [f for f in content["facts"] if f["key"] == key and f["status"] == "active"]


def tool(content: dict[str, Any], call_id: str) -> dict[str, Any]:
    [entry] = [t for t in content["tool_state"] if t["tool_call_id"] == call_id]
    return entry


# --- rules -------------------------------------------------------------------------------------


def test_timeout_is_unknown_never_failed_and_blocks() -> None:
    log = Log()
    log.user("refund order 1")
    call = log.call("r1", "refund", side_effect=True, key="idem-1")
    log.result("r1", "timeout")
    content = fold_all(log)
    entry = tool(content, "r1")
    assert entry["status"] == "unknown"
    assert entry["idempotency_key"] == "idem-1" and entry["side_effect"] is True
    [pending] = [p for p in content["pending"] if p["kind"] == "side_effect"]
    assert pending["blocking"] is True and call["seq"] in pending["source_event_ids"]
    assert content["task"]["status"] == "unknown"


def test_resolution_updates_status_and_completes_action() -> None:
    log = Log()
    log.user("refund order 1")
    call = log.call("r1", "refund", side_effect=True)
    log.result("r1", "timeout")
    log.assistant("the refund timed out")
    first = fold_all(log)
    resolution = log.resolve(call["seq"], "succeeded")
    content = fold_structured(previous=first, events=[resolution], covered_from=5, covered_until=5)
    entry = tool(content, "r1")
    assert entry["status"] == "succeeded"
    assert resolution["seq"] in entry["source_event_ids"]
    assert not [p for p in content["pending"] if p["kind"] == "side_effect"]
    assert [a["tool_call_id"] for a in content["completed_actions"]] == ["r1"]


def test_user_correction_supersedes_tool_value_and_later_tool_supersedes_correction() -> None:
    log = Log()
    log.user("check the order")
    log.call("c1", "get_order")
    log.result("c1", facts=[{"key": "order.total", "value": 80}])
    correction = log.annotate("correction", "user", {"key": "order.total", "value": 70})
    content = fold_all(log)
    [current] = active(content, "order.total")
    assert (current["value"], current["previous_value"], current["authority"]) == (70, 80, "user")
    assert current["source_event_ids"] == [correction["seq"]]
    superseded = [f for f in content["facts"] if f["status"] == "superseded"]
    assert [f["value"] for f in superseded] == [80]

    log.call("c2", "get_order")
    later = log.result("c2", facts=[{"key": "order.total", "value": 75}])
    content = fold_all(log)
    [current] = active(content, "order.total")
    assert (current["value"], current["previous_value"], current["authority"]) == (75, 70, "tool")
    assert current["source_event_ids"] == [later["seq"]]
    assert sorted(f["value"] for f in content["facts"] if f["status"] == "superseded") == [70, 80]


def test_model_guess_never_overrides_a_confirmed_fact() -> None:
    log = Log()
    log.user("what is the total?")
    log.fact("order.total", 70, "operator")
    guess = log.fact("order.total", 99, "model")
    content = fold_all(log)
    [current] = active(content, "order.total")
    assert current["value"] == 70 and current["confidence"] == "confirmed"
    [question] = content["open_questions"]
    assert question["source_event_ids"] == [guess["seq"]] and question["value"] == 99
    assert any(p["kind"] == "question" for p in content["pending"])


def test_model_guess_stands_until_confirmed_then_is_superseded() -> None:
    log = Log()
    log.user("what is the total?")
    log.fact("order.total", 99, "model")
    [guess] = active(fold_all(log), "order.total")
    assert (guess["authority"], guess["confidence"]) == ("model", "inferred")
    log.fact("order.total", 70, "tool")
    content = fold_all(log)
    [current] = active(content, "order.total")
    assert (current["value"], current["previous_value"]) == (70, 99)
    assert not content["open_questions"]


def test_constraints_kept_verbatim_and_requests_capped() -> None:
    log = Log()
    long_text = "y" * (fold_module.MAX_REQUEST_CHARS + 10)
    request = log.user(long_text)
    constraint = log.annotate("constraint", "user", {"text": "Never refund more than 50 EUR."})
    content = fold_all(log)
    assert content["constraints"] == [
        {
            "text": "Never refund more than 50 EUR.",
            "status": "active",
            "authority": "user",
            "source_event_ids": [constraint["seq"]],
        }
    ]
    [kept] = content["requests"]
    assert kept["truncated"] is True and len(kept["text"]) == fold_module.MAX_REQUEST_CHARS
    assert kept["seq"] == request["seq"]


def test_constraint_expiry_by_reference() -> None:
    log = Log()
    log.user("go")
    first = log.annotate("constraint", "user", {"text": "no refunds today"})
    log.annotate(
        "constraint", "operator", {"text": "lifted", "expires": True}, refers_to=[first["seq"]]
    )
    [entry] = fold_all(log)["constraints"]
    assert entry["status"] == "expired" and entry["source_event_ids"] == [2, 3]


def test_approvals_pending_until_decided() -> None:
    log = Log()
    log.user("refund 60 EUR")
    request = log.approval("refund 60 EUR")
    content = fold_all(log)
    assert content["task"]["status"] == "waiting_for_approval"
    assert [p["approval_seq"] for p in content["pending"] if p["kind"] == "approval"] == [
        request["seq"]
    ]
    decision = log.decide(request["seq"], "reject", "over the limit")
    content = fold_all(log)
    assert not [p for p in content["pending"] if p["kind"] == "approval"]
    [entry] = content["decisions"]
    assert entry["decision"] == "reject" and entry["source_event_ids"] == [
        request["seq"],
        decision["seq"],
    ]


def test_assistant_prose_dropped_except_last_reply_per_unit() -> None:
    log = Log()
    log.user("first")
    log.assistant("thinking out loud")
    log.assistant("answer one")
    log.user("second")
    last = log.assistant("answer two")
    content = fold_all(log)
    assert [r["text"] for r in content["last_replies"]] == ["answer one", "answer two"]
    assert content["last_replies"][-1]["source_event_ids"] == [last["seq"]]
    assert content["task"]["status"] == "waiting_for_user"
    assert "thinking out loud" not in canonical_json(content).decode()


def test_goal_annotation_beats_first_message() -> None:
    log = Log()
    log.user("hi, I need help with order 10086")
    assert fold_all(log)["task"]["goal"] == "hi, I need help with order 10086"
    goal = log.annotate("goal", "user", {"text": "refund order 10086"})
    task = fold_all(log)["task"]
    assert task["goal"] == "refund order 10086" and task["source_event_ids"] == [goal["seq"]]


def test_tool_result_reduced_to_status_facts_and_reference() -> None:
    log = Log()
    log.user("look it up")
    log.call("c1", "search", arguments={"q": "order"})
    result = log.result(
        "c1", result={"huge": "z" * 5000}, facts=[{"key": "order.status", "value": "paid"}]
    )
    content = fold_all(log)
    assert "zzzz" not in canonical_json(content).decode()
    assert tool(content, "c1")["result_seq"] == result["seq"]
    assert active(content, "order.status")[0]["source_event_ids"] == [result["seq"]]


def test_content_stays_bounded_and_counts_what_it_dropped() -> None:
    log = Log()
    total = fold_module.MAX_REQUESTS + 30
    for i in range(total):
        log.user(f"request {i}")
        log.call(f"c{i}", "lookup")
        log.result(f"c{i}")
    content = fold_all(log)
    assert len(content["requests"]) == fold_module.MAX_REQUESTS
    assert content["requests"][-1]["text"] == f"request {total - 1}"
    assert content["counts"]["requests_dropped"] == 30
    assert len(content["completed_actions"]) == fold_module.MAX_COMPLETED_ACTIONS
    assert (
        content["counts"]["completed_actions_dropped"] == total - fold_module.MAX_COMPLETED_ACTIONS
    )
    assert content["counts"]["events_folded"] == log.last_seq


def test_unknown_side_effects_are_never_capped_away() -> None:
    log = Log()
    log.user("go")
    log.call("risky", "refund", side_effect=True)
    log.result("risky", "timeout")
    for i in range(fold_module.MAX_FINAL_TOOL_STATE + 5):
        log.call(f"c{i}")
        log.result(f"c{i}")
    content = fold_all(log)
    assert tool(content, "risky")["status"] == "unknown"
    assert len(content["tool_state"]) == fold_module.MAX_FINAL_TOOL_STATE + 1
    assert content["counts"]["tool_state_dropped"] == 5


def test_tool_state_from_log_matches_fold() -> None:
    log = Log()
    log.user("go")
    log.call("a", "refund", side_effect=True)
    log.call("b", "lookup")
    log.result("b", "failed")
    log.result("a", "timeout")
    assert tool_state_from_log(previous=None, events=log.events) == fold_all(log)["tool_state"]


# --- properties --------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(data=st.data(), log=logs(close_all=True))
def test_rolling_fold_equals_folding_at_once(data: st.DataObject, log: Log) -> None:
    cuts = boundaries(log)
    if not cuts:
        return
    until = last_closed_boundary(split_units(log.events))
    assert until == cuts[-1]
    chosen = sorted(set(data.draw(st.lists(st.sampled_from(cuts), max_size=4))) | {until})
    at_once = fold_all(log, until)
    rolled = fold_rolling(log, chosen)
    assert rolled is not None
    assert rolled["tool_state"] == at_once["tool_state"]
    assert rolled["facts"] == at_once["facts"]
    # The rest of the content rolls the same way too, counts included.
    assert canonical_json(rolled) == canonical_json(at_once)


@settings(max_examples=80, deadline=None)
@given(log=logs())
def test_fold_is_deterministic(log: Log) -> None:
    until = last_closed_boundary(split_units(log.events))
    events = log.events[:until]
    first = fold_structured(previous=None, events=events, covered_from=1, covered_until=until)
    copied = [dict(e) for e in events]
    second = fold_structured(previous=None, events=copied, covered_from=1, covered_until=until)
    assert canonical_json(first) == canonical_json(second)
    assert copied == events  # the fold does not mutate its input


@settings(max_examples=80, deadline=None)
@given(log=logs(close_all=True))
def test_fold_invariants(log: Log) -> None:
    content = fold_all(log)
    assert pending_from_log(previous=None, events=log.events) == [
        p for p in content["pending"] if p["kind"] != "question"
    ]
    keys = [f["key"] for f in content["facts"] if f["status"] == "active"]
    assert len(keys) == len(set(keys)), "at most one active fact per key"
    for fact in content["facts"]:
        if fact["authority"] == "model":
            assert fact["confidence"] == "inferred"
    for entry in content["tool_state"]:
        assert entry["status"] != "failed" or any(
            e["seq"] in entry["source_event_ids"] and e.get("status") == "failed"
            for e in log.events
            if e["kind"] in ("tool_result", "side_effect_resolution")
        ), "failed only when the log says failed"


def test_repeated_same_value_is_cited_and_model_repeat_does_not_downgrade() -> None:
    log = Log()
    log.user("total?")
    first = log.fact("order.total", 70, "user")
    echo = log.annotate("correction", "model", {"key": "order.total", "value": 70})
    [current] = active(fold_all(log), "order.total")
    assert current["confidence"] == "confirmed" and current["authority"] == "user"
    assert current["source_event_ids"] == [first["seq"], echo["seq"]]
