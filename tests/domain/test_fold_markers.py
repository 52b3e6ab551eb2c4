"""Retraction and reset in units, the fold and verification (docs/event-log.md, "Interaction units";
docs/pipeline.md, "Fold with a summariser backend" and "Verify")."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.domain.eventlog import Log
from tests.domain.strategies import logs
from threads.domain.canonical import canonical_json
from threads.domain.fold import fold_structured, world_state
from threads.domain.markers import MARKER_KINDS, answered_calls, retracted_items
from threads.domain.units import last_closed_boundary, split_units
from threads.domain.verify import verify_candidate


def fold(log: Log, previous: dict[str, Any] | None = None, after: int = 0) -> dict[str, Any]:
    return fold_structured(
        previous=previous,
        events=log.events[after:],
        covered_from=after + 1,
        covered_until=log.last_seq,
    )


def verify(
    log: Log, candidate: dict[str, Any], previous: dict[str, Any] | None = None, after: int = 0
) -> dict[str, bool]:
    result = verify_candidate(
        candidate=candidate,
        previous=previous,
        events=log.events[after:],
        base_covered_until=after,
        boundary=log.last_seq,
        chain_hash_at_boundary=log.head,
        expected_chain_hash=log.head,
    )
    return {c.name: c.ok for c in result.checks}


def cited(content: dict[str, Any], section: str) -> set[int]:
    return {s for entry in content[section] for s in entry["source_event_ids"]}


# --- units -------------------------------------------------------------------------------------


def test_a_retracted_user_message_starts_no_unit_and_markers_split_nothing() -> None:
    log = Log()
    log.user("first")
    log.assistant("one")
    log.user("typo")  # 3, retracted below
    log.retract(3)
    log.reset()
    log.assistant("two")
    units = split_units(log.events)
    assert [(u.from_seq, u.to_seq) for u in units] == [(1, 6)]
    assert all(u.closed for u in units)


def test_a_retracted_call_keeps_its_unit_open_until_it_has_a_result() -> None:
    log = Log()
    log.user("go")
    log.call("c1")
    log.retract(2)
    assert last_closed_boundary(split_units(log.events)) == 0
    log.result("c1")
    assert last_closed_boundary(split_units(log.events)) == 4


# --- the fold ----------------------------------------------------------------------------------


def test_the_fold_leaves_retracted_content_out_but_keeps_what_the_tools_did() -> None:
    log = Log()
    log.user("refund order 1")  # 1
    log.user("secret: my password is hunter2")  # 2, retracted
    log.annotate("constraint", "user", {"text": "at most 50 EUR"})  # 3, retracted
    log.call("r1", "refund", side_effect=True)  # 4
    log.result("r1", facts=[{"key": "refund.id", "value": "x1"}])  # 5, retracted: takes #4 too
    log.call("l1", "lookup")  # 6
    log.result("l1", facts=[{"key": "order.total", "value": 40}])  # 7
    log.assistant("done")  # 8
    for seq in (2, 3, 5):
        log.retract(seq)
    content = fold(log)
    assert [r["seq"] for r in content["requests"]] == [1]
    assert "hunter2" not in canonical_json(content).decode()
    assert content["constraints"] == []
    assert [f["key"] for f in content["facts"]] == ["order.total"]
    assert [a["tool_call_id"] for a in content["completed_actions"]] == ["l1"]
    # The refund happened: tool state still reports it, cited.
    [refund] = [t for t in content["tool_state"] if t["tool_call_id"] == "r1"]
    assert refund["status"] == "succeeded" and {4, 5} <= set(refund["source_event_ids"])
    markers = {e["seq"] for e in log.events if e["kind"] in MARKER_KINDS}
    assert not markers & cited(content, "requests") and not markers & cited(content, "tool_state")
    assert all(verify(log, content).values())


def test_a_reset_starts_the_content_afresh_and_keeps_the_world() -> None:
    log = Log()
    log.user("old request")  # 1
    log.annotate("constraint", "user", {"text": "old constraint"})  # 2
    log.fact("customer.email", "a@example.org")  # 3
    log.call("r1", "refund", side_effect=True)  # 4
    log.result("r1", "timeout")  # 5
    log.approval("issue credit")  # 6
    log.assistant("waiting")  # 7
    log.reset()  # 8
    log.user("new request")  # 9
    content = fold(log)
    assert [r["text"] for r in content["requests"]] == ["new request"]
    assert content["task"]["goal"] == "new request"
    assert content["constraints"] == [] and content["facts"] == []
    assert content["last_replies"] == []
    [refund] = content["tool_state"]
    assert refund["status"] == "unknown"
    assert {p["kind"] for p in content["pending"]} == {"side_effect", "approval"}
    assert content["task"]["status"] == "waiting_for_approval"
    assert all(verify(log, content).values())


def test_a_rebuild_from_a_reset_on_the_heads_world_state_verifies() -> None:
    """What the fold service does when a retraction names an event the head covers."""
    log = Log()
    log.user("before")
    log.call("r1", "refund", side_effect=True)
    log.result("r1", "timeout")
    log.reset()  # 4
    log.user("please forget this")  # 5
    log.assistant("ok")  # 6
    head = fold(log)
    log.retract(5)  # 7
    log.user("next")  # 8
    world = world_state(head)
    rebuilt = fold(log, previous=world, after=4)
    assert [r["seq"] for r in rebuilt["requests"]] == [8]
    assert [t["tool_call_id"] for t in rebuilt["tool_state"]] == ["r1"]
    assert any(p["kind"] == "side_effect" for p in rebuilt["pending"])
    assert rebuilt["covered"]["from_seq"] == head["covered"]["from_seq"]
    assert all(verify(log, rebuilt, previous=world, after=4).values())


def test_an_answer_to_a_call_retracted_before_the_head_folds_as_at_once_only_rebuilt() -> None:
    """The example the property below once failed on: rolling on from a head that saw the
    call retracted, the resolution made the retracted refund a completed action."""
    log = Log()
    log.user("refund it")  # 1
    log.call("c2x", "refund", side_effect=True)  # 2
    log.result("c2x", "timeout")  # 3
    log.retract(2)  # 4
    log.user("next")  # 5
    log.resolve(2, "succeeded")  # 6
    log.user("thanks")  # 7
    at_once = fold(log)
    assert at_once["completed_actions"] == []
    head = fold_structured(previous=None, events=log.events[:5], covered_from=1, covered_until=5)
    rolled = fold(log, previous=head, after=5)
    assert [a["tool_call_id"] for a in rolled["completed_actions"]] == ["c2x"]  # what went wrong
    assert answered_calls(log.events[5:], until=5) & retracted_items(log.events[:5]) == {2}
    rebuilt = fold(log)  # from before the call: no reset, so from the start
    assert canonical_json(rebuilt) == canonical_json(at_once)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), log=logs(close_all=True, markers=True))
def test_rolling_over_markers_equals_folding_at_once(data: st.DataObject, log: Log) -> None:
    """As long as no retraction names an event before the cut (the service rebuilds then); an
    answer to a call retracted before the cut is folded as the service does, rebuilt."""
    until = last_closed_boundary(split_units(log.events))
    if not until:
        return
    cut = data.draw(st.integers(min_value=0, max_value=until))
    cut = last_closed_boundary(split_units(log.events[:cut])) if cut else 0
    later = log.events[cut:until]
    if any(e["kind"] == "retraction" and e["retracts"] <= cut for e in later):
        return
    at_once = fold_structured(
        previous=None, events=log.events[:until], covered_from=1, covered_until=until
    )
    head = (
        fold_structured(previous=None, events=log.events[:cut], covered_from=1, covered_until=cut)
        if cut
        else None
    )
    start = cut
    gone = answered_calls(later, until=cut) & retracted_items(log.events[:cut])
    if gone:
        # An answer to a call retracted before the cut: the service rebuilds from the last
        # reset before that call (threads.services.fold_preparation.rebuild_start).
        start = max((e["seq"] for e in log.events[: min(gone)] if e["kind"] == "reset"), default=0)
        head = world_state(head) if start and head is not None else None
    rolled = fold_structured(
        previous=head, events=log.events[start:until], covered_from=start + 1, covered_until=until
    )
    assert canonical_json(rolled) == canonical_json(at_once)


@settings(max_examples=150, deadline=None)
@given(log=logs(close_all=True, markers=True))
def test_the_fold_of_a_log_with_markers_verifies_and_cites_nothing_retracted(log: Log) -> None:
    until = last_closed_boundary(split_units(log.events))
    events = log.events[:until]
    content = fold_structured(previous=None, events=events, covered_from=1, covered_until=until)
    result = verify_candidate(
        candidate=content,
        previous=None,
        events=events,
        base_covered_until=0,
        boundary=until,
        chain_hash_at_boundary=events[-1]["hash"] if events else log.head,
        expected_chain_hash=events[-1]["hash"] if events else log.head,
    )
    assert result.ok, result.failed()
    retracted = retracted_items(events)
    for section in ("requests", "constraints", "completed_actions", "last_replies"):
        assert not retracted & cited(content, section), section
    # A decision on an approval cites the request, retracted or not: the queue is the world's.
    for entry in content["decisions"]:
        if "approval_seq" not in entry:
            assert not retracted & set(entry["source_event_ids"])


# --- verification ------------------------------------------------------------------------------


def _constraints_log() -> Log:
    log = Log()
    log.user("go")  # 1
    log.annotate("constraint", "user", {"text": "kept"})  # 2
    log.annotate("constraint", "user", {"text": "taken back"})  # 3
    log.annotate("correction", "user", {"key": "k", "value": 1})  # 4
    log.retract(3)  # 5
    log.retract(4)  # 6
    return log


def test_a_retracted_constraint_or_correction_need_not_be_cited() -> None:
    log = _constraints_log()
    content = fold(log)
    assert cited(content, "constraints") == {2} and content["facts"] == []
    assert verify(log, content)["constraints_cited"]


def test_a_constraint_that_was_not_retracted_must_still_be_cited() -> None:
    log = _constraints_log()
    content = fold(log)
    broken = copy.deepcopy(content)
    broken["constraints"] = []
    assert not verify(log, broken)["constraints_cited"]


def test_a_constraint_before_a_reset_in_the_range_need_not_be_cited() -> None:
    log = Log()
    log.user("go")
    log.annotate("constraint", "user", {"text": "before"})  # 2
    log.reset()  # 3
    log.annotate("constraint", "user", {"text": "after"})  # 4
    content = fold(log)
    assert cited(content, "constraints") == {4}
    assert verify(log, content)["constraints_cited"]
    broken = copy.deepcopy(content)
    broken["constraints"] = []
    assert not verify(log, broken)["constraints_cited"]  # #4 comes after the reset


def test_a_retracted_side_effecting_call_must_still_be_cited() -> None:
    log = Log()
    log.user("refund")
    log.call("r1", "refund", side_effect=True)  # 2
    log.result("r1")  # 3
    log.retract(2)  # 4
    log.reset()  # 5
    content = fold(log)
    checks = verify(log, content)
    assert all(checks.values()), checks
    broken = copy.deepcopy(content)
    broken["tool_state"] = []
    assert not verify(log, broken)["side_effects_cited"]


def test_markers_need_no_citation() -> None:
    log = Log()
    log.user("a")
    log.assistant("b")
    log.retract(2)
    log.reset()
    log.user("c")
    content = fold(log)
    every = {s for section in ("requests", "last_replies") for s in cited(content, section)}
    assert every == {5}
    assert all(verify(log, content).values())


def test_a_retracted_confirmed_fact_no_longer_holds_a_model_guess_back() -> None:
    log = Log()
    log.user("go")
    log.fact("order.total", 80, "user")  # 2, retracted
    log.retract(2)
    log.fact("order.total", 99, "model")  # 4
    content = fold(log)
    [fact] = content["facts"]
    assert (fact["value"], fact["authority"]) == (99, "model")
    assert verify(log, content)["no_model_override"]
    # Without the retraction the same candidate lets a guess stand over a confirmed fact.
    unretracted = Log()
    unretracted.user("go")
    unretracted.fact("order.total", 80, "user")
    unretracted.assistant("noted")
    unretracted.fact("order.total", 99, "model")
    assert not verify(unretracted, content)["no_model_override"]


def test_a_confirmed_fact_before_a_reset_no_longer_holds_a_model_guess_back() -> None:
    log = Log()
    log.fact("order.total", 80, "user")
    log.reset()
    log.fact("order.total", 99, "model")
    content = fold(log)
    assert [f["value"] for f in content["facts"]] == [99]
    assert all(verify(log, content).values())
