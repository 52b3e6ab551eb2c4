"""Verification: a good candidate passes every check; each defect fails exactly its check."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings

from tests.domain.eventlog import Log
from tests.domain.strategies import logs
from threads.domain import fold as fold_module
from threads.domain.fold import fold_structured
from threads.domain.units import last_closed_boundary, split_units
from threads.domain.verify import CHECK_NAMES, verify_candidate
from threads.domain.verify_citations import cited_seqs


def scenario() -> tuple[Log, dict[str, Any], int]:
    """A head folded at `base`, then new events to fold on top of it."""
    log = Log()
    log.user("Refund order 10086, at most 50 EUR")
    log.annotate("constraint", "user", {"text": "refund at most 50 EUR"})
    log.call("c1", "get_order")
    log.result("c1", facts=[{"key": "order.total", "value": 80}])
    log.assistant("the order is 80 EUR")
    base = log.last_seq
    previous = fold_structured(previous=None, events=log.events, covered_from=1, covered_until=base)
    log.user("actually it was 70, refund now")
    log.annotate("correction", "user", {"key": "order.total", "value": 70})
    log.annotate("constraint", "operator", {"text": "no refunds on weekends"})
    log.call("r1", "refund", side_effect=True, key="refund-10086")
    log.result("r1", "timeout")
    log.fact("order.total", 99, "model")
    log.assistant("the refund timed out")
    return log, previous, base


def verify(
    log: Log,
    previous: dict[str, Any] | None,
    base: int,
    candidate: dict[str, Any],
    **overrides: Any,
) -> dict[str, bool]:
    args: dict[str, Any] = {
        "candidate": candidate,
        "previous": previous,
        "events": log.events[base:],
        "base_covered_until": base,
        "boundary": log.last_seq,
        "chain_hash_at_boundary": log.head,
        "expected_chain_hash": log.head,
    }
    args.update(overrides)
    result = verify_candidate(**args)
    assert [c.name for c in result.checks] == list(CHECK_NAMES)
    assert result.ok == all(c.ok for c in result.checks)
    return {c.name: c.ok for c in result.checks}


def good() -> tuple[Log, dict[str, Any], int, dict[str, Any]]:
    log, previous, base = scenario()
    candidate = fold_structured(
        previous=previous,
        events=log.events[base:],
        covered_from=base + 1,
        covered_until=log.last_seq,
    )
    return log, previous, base, candidate


def test_structured_candidate_passes_every_check() -> None:
    log, previous, base, candidate = good()
    log_result = verify_candidate(
        candidate=candidate,
        previous=previous,
        events=log.events[base:],
        base_covered_until=base,
        boundary=log.last_seq,
        chain_hash_at_boundary=log.head,
        expected_chain_hash=log.head,
    )
    assert log_result.ok, log_result.as_dict()
    as_dict = log_result.as_dict()
    assert as_dict["ok"] is True
    assert [c["name"] for c in as_dict["checks"]] == list(CHECK_NAMES)


def _side_effect_seq(log: Log) -> int:
    return next(e["seq"] for e in log.events if e["kind"] == "tool_call" and e["side_effect"])


def _drop_citations_of(seq: int) -> Callable[[dict[str, Any], Log], None]:
    def breaker(candidate: dict[str, Any], log: Log) -> None:
        for section in ("tool_state", "pending", "completed_actions", "constraints", "facts"):
            candidate[section] = [e for e in candidate[section] if seq not in e["source_event_ids"]]

    return breaker


def _break_schema(c: dict[str, Any], log: Log) -> None:
    c["schema_version"] = 2


def _break_enums(c: dict[str, Any], log: Log) -> None:
    c["task"]["status"] = "dancing"


def _break_sources_exist(c: dict[str, Any], log: Log) -> None:
    c["constraints"][0]["source_event_ids"].append("2")


def _break_sources_in_range(c: dict[str, Any], log: Log) -> None:
    c["requests"][-1]["source_event_ids"].append(log.last_seq + 5)


def _break_side_effects_cited(c: dict[str, Any], log: Log) -> None:
    _drop_citations_of(_side_effect_seq(log))(c, log)


def _break_constraints_cited(c: dict[str, Any], log: Log) -> None:
    c["constraints"] = [x for x in c["constraints"] if x["text"] != "no refunds on weekends"]


def _break_tool_status(c: dict[str, Any], log: Log) -> None:
    for entry in c["tool_state"]:
        if entry["side_effect"]:
            entry["status"] = "failed"  # the log says timeout: unknown


def _break_no_model_override(c: dict[str, Any], log: Log) -> None:
    for fact in c["facts"]:
        if fact["status"] == "active" and fact["key"] == "order.total":
            fact["authority"], fact["confidence"], fact["value"] = "model", "inferred", 99


def _break_cursor(c: dict[str, Any], log: Log) -> None:
    c["covered"]["to_seq"] = log.last_seq - 1


def _seq_of(log: Log, kind: str, **fields: Any) -> int:
    return next(
        e["seq"]
        for e in log.events
        if e["kind"] == kind and all(e.get(k) == v for k, v in fields.items())
    )


def _break_task_status(c: dict[str, Any], log: Log) -> None:
    c["task"]["status"] = "succeeded"  # the refund's outcome is unknown


def _break_completed_actions(c: dict[str, Any], log: Log) -> None:
    call = _side_effect_seq(log)
    result = _seq_of(log, "tool_result", call_seq=call)
    c["completed_actions"].append(
        {"tool_call_id": "r1", "action": "refund", "source_event_ids": [call, result]}
    )


def _break_facts_cite_support(c: dict[str, Any], log: Log) -> None:
    asked = _seq_of(log, "message", role="user", content="actually it was 70, refund now")
    fact = {
        "key": "customer.email",
        "value": "ann@example.com",
        "authority": "user",
        "confidence": "confirmed",
        "status": "active",
        "source_event_ids": [asked],
    }
    c["facts"].append(fact)


def _break_facts_current(c: dict[str, Any], log: Log) -> None:
    # The correction undone: the old value active again, the corrected one superseded.
    for fact in c["facts"]:
        if fact["key"] == "order.total":
            fact["status"] = "active" if fact["value"] == 80 else "superseded"


def _break_constraints_verbatim(c: dict[str, Any], log: Log) -> None:
    for entry in c["constraints"]:
        if entry["text"] == "no refunds on weekends":
            entry["text"] = "refunds on weekends are fine"


def _break_decisions_cite_support(c: dict[str, Any], log: Log) -> None:
    asked = _seq_of(log, "message", role="user", content="actually it was 70, refund now")
    c["decisions"].append({"text": "approve a refund of 500", "source_event_ids": [asked]})


def _break_citations_fit_entries(c: dict[str, Any], log: Log) -> None:
    c["requests"][-1]["text"] = "refund 700 now"


def _break_claims_match_ledger(c: dict[str, Any], log: Log) -> None:
    # Held by the call it cites (its words are there), but the call's outcome is unknown.
    call = _side_effect_seq(log)
    c["decisions"].append({"text": "refund r1 completed", "source_event_ids": [call]})


def _break_narrative(c: dict[str, Any], log: Log) -> None:
    c["narrative"] = "The order total was corrected to 70 and the customer was paid."


BREAKERS: dict[str, Callable[[dict[str, Any], Log], None]] = {
    "schema": _break_schema,
    "enums": _break_enums,
    "sources_exist": _break_sources_exist,
    "sources_in_range": _break_sources_in_range,
    "side_effects_cited": _break_side_effects_cited,
    "constraints_cited": _break_constraints_cited,
    "tool_status_matches_log": _break_tool_status,
    "no_model_override": _break_no_model_override,
    "cursor_continuity": _break_cursor,
    "task_status_matches_ledger": _break_task_status,
    "completed_actions_match_ledger": _break_completed_actions,
    "facts_cite_support": _break_facts_cite_support,
    "facts_current": _break_facts_current,
    "constraints_verbatim": _break_constraints_verbatim,
    "decisions_cite_support": _break_decisions_cite_support,
    "citations_fit_entries": _break_citations_fit_entries,
    "claims_match_ledger": _break_claims_match_ledger,
    "narrative_matches_ledger": _break_narrative,
}


@pytest.mark.parametrize("name", sorted(BREAKERS))
def test_each_defect_fails_exactly_its_check(name: str) -> None:
    log, previous, base, candidate = good()
    broken = copy.deepcopy(candidate)
    BREAKERS[name](broken, log)
    assert broken != candidate
    verdict = verify(log, previous, base, broken)
    assert [n for n, ok in verdict.items() if not ok] == [name]


def test_chain_hash_mismatch_fails_exactly_chain_hash() -> None:
    log, previous, base, candidate = good()
    verdict = verify(log, previous, base, candidate, expected_chain_hash="0" * 64)
    assert [n for n, ok in verdict.items() if not ok] == ["chain_hash"]


def test_boundary_behind_head_fails_cursor_continuity() -> None:
    log, previous, base, candidate = good()
    result = verify_candidate(
        candidate=candidate,
        previous=previous,
        events=log.events[base:],
        base_covered_until=log.last_seq + 1,
        boundary=log.last_seq,
        chain_hash_at_boundary=log.head,
        expected_chain_hash=log.head,
    )
    [failed] = [c for c in result.checks if c.name == "cursor_continuity"]
    assert not failed.ok and "before the head" in failed.detail


def test_details_name_the_offending_entry_and_seq() -> None:
    log, previous, base, candidate = good()
    se_seq = _side_effect_seq(log)
    _break_side_effects_cited(candidate, log)
    _break_tool_status(candidate, log)
    result = verify_candidate(
        candidate=candidate,
        previous=previous,
        events=log.events[base:],
        base_covered_until=base,
        boundary=log.last_seq,
        chain_hash_at_boundary=log.head,
        expected_chain_hash=log.head,
    )
    detail = {c.name: c.detail for c in result.checks}
    assert f"#{se_seq}" in detail["side_effects_cited"]


def test_citing_an_old_seq_the_previous_summary_never_cited_fails_sources_exist() -> None:
    log = Log()
    log.user("a")
    dropped = log.assistant("prose the fold drops")
    log.assistant("last reply")
    previous = fold_structured(previous=None, events=log.events, covered_from=1, covered_until=3)
    log.user("b")
    candidate = fold_structured(
        previous=previous, events=log.events[3:], covered_from=4, covered_until=4
    )
    assert verify(log, previous, 3, candidate)["sources_exist"] is True
    candidate["decisions"].append({"text": "made up", "source_event_ids": [dropped["seq"]]})
    verdict = verify(log, previous, 3, candidate)
    assert [n for n, ok in verdict.items() if not ok] == ["sources_exist"]


def test_malformed_candidate_fails_without_raising() -> None:
    log, previous, base, _ = good()
    verdict = verify(log, previous, base, {"schema_version": 1, "facts": "nope", "task": 3})
    assert verdict["schema"] is False and verdict["cursor_continuity"] is False
    not_object = verify_candidate(
        candidate=[],  # type: ignore[arg-type]
        previous=previous,
        events=log.events[base:],
        base_covered_until=base,
        boundary=log.last_seq,
        chain_hash_at_boundary=log.head,
        expected_chain_hash=log.head,
    )
    assert not_object.ok is False


@settings(max_examples=60, deadline=None)
@given(log=logs(close_all=True))
def test_structured_fold_always_verifies(log: Log) -> None:
    boundary = last_closed_boundary(split_units(log.events))
    cut = boundary // 2
    cut = last_closed_boundary(split_units(log.events[:cut])) if cut else 0
    previous = (
        fold_structured(previous=None, events=log.events[:cut], covered_from=1, covered_until=cut)
        if cut
        else None
    )
    candidate = fold_structured(
        previous=previous,
        events=log.events[cut:boundary],
        covered_from=cut + 1,
        covered_until=boundary,
    )
    head = log.hash_at(boundary) if boundary else log.head
    result = verify_candidate(
        candidate=candidate,
        previous=previous,
        events=log.events[cut:boundary],
        base_covered_until=cut,
        boundary=boundary,
        chain_hash_at_boundary=head,
        expected_chain_hash=head,
        # As the service does: the older events the candidate cites, for the claim checks.
        cited_events={s: log.events[s - 1] for s in cited_seqs(candidate) if 0 < s <= cut},
    )
    assert result.ok, result.as_dict()


def _fold_all(log: Log) -> tuple[dict[str, Any], int]:
    boundary = last_closed_boundary(split_units(log.events))
    content = fold_structured(
        previous=None, events=log.events[:boundary], covered_from=1, covered_until=boundary
    )
    return content, boundary


def _failed(log: Log, candidate: dict[str, Any], boundary: int) -> list[str]:
    head = log.hash_at(boundary) if boundary else log.head
    result = verify_candidate(
        candidate=candidate,
        previous=None,
        events=log.events[:boundary],
        base_covered_until=0,
        boundary=boundary,
        chain_hash_at_boundary=head,
        expected_chain_hash=head,
    )
    return result.failed()


@settings(max_examples=60, deadline=None)
@given(log=logs(close_all=True, markers=True))
def test_a_success_the_ledger_denies_is_always_refused(log: Log) -> None:
    """Whatever the log, saying a call succeeded that did not — in the task, a completed
    action, a fact citing its result, or the narrative — is refused by its claim check."""
    content, boundary = _fold_all(log)
    denied = [t for t in content["tool_state"] if t["status"] != "succeeded"]
    blocking = [p for p in content["pending"] if p["blocking"]]
    if blocking:
        lie = copy.deepcopy(content)
        lie["task"]["status"] = "succeeded"
        assert "task_status_matches_ledger" in _failed(log, lie, boundary)
    for call in denied:
        name = f"{call['tool']} {call['tool_call_id']}"
        sources = list(call["source_event_ids"])
        lies = {
            "completed_actions_match_ledger": (
                "completed_actions",
                {"tool_call_id": call["tool_call_id"], "action": name, "source_event_ids": sources},
            ),
            "facts_cite_support": (
                "facts",
                {
                    "key": f"{call['tool_call_id']}_outcome",
                    "value": "succeeded",
                    "authority": "tool",
                    "confidence": "confirmed",
                    "status": "active",
                    "source_event_ids": sources,
                },
            ),
        }
        for check, (section, entry) in lies.items():
            lie = copy.deepcopy(content)
            lie[section].append(entry)
            assert check in _failed(log, lie, boundary), (check, entry)
        lie = copy.deepcopy(content)
        lie["narrative"] = f"Call {call['tool_call_id']} succeeded."
        assert "narrative_matches_ledger" in _failed(log, lie, boundary)


def test_bulk_fold_past_the_caps_still_cites_every_side_effect_and_correction() -> None:
    log = Log()
    log.user("import")
    for i in range(fold_module.MAX_FINAL_TOOL_STATE + 20):
        log.call(f"r{i}", "refund", side_effect=True)
        log.result(f"r{i}")
    for i in range(fold_module.MAX_SUPERSEDED_FACTS + 10):
        log.annotate("correction", "user", {"key": "order.total", "value": i})
        log.fact("order.total", -i, "model")
    first = log.last_seq
    candidate = fold_structured(
        previous=None, events=log.events, covered_from=1, covered_until=first
    )
    assert verify(log, None, 0, candidate) == dict.fromkeys(CHECK_NAMES, True)
    # The next fold may let the old entries go and stays bounded.
    log.user("next")
    log.call("last", "refund", side_effect=True)
    log.result("last")
    rolled = fold_structured(
        previous=candidate,
        events=log.events[first:],
        covered_from=first + 1,
        covered_until=log.last_seq,
    )
    assert len(rolled["tool_state"]) == fold_module.MAX_FINAL_TOOL_STATE
    assert sum(f["status"] == "superseded" for f in rolled["facts"]) == (
        fold_module.MAX_SUPERSEDED_FACTS
    )
    assert verify(log, candidate, first, rolled) == dict.fromkeys(CHECK_NAMES, True)


def test_chain_hash_detail_keeps_the_callers_explanation() -> None:
    log, previous, base, candidate = good()
    result = verify_candidate(
        candidate=candidate,
        previous=previous,
        events=log.events[base:],
        base_covered_until=base,
        boundary=log.last_seq,
        chain_hash_at_boundary=log.head,
        expected_chain_hash="chain broken at seq 7: hash mismatch",
    )
    [check] = [c for c in result.checks if c.name == "chain_hash"]
    assert not check.ok and "chain broken at seq 7" in check.detail
    assert log.head[:12] in check.detail


def test_event_hash_must_match_the_boundary_hash() -> None:
    log, previous, base, candidate = good()
    tampered = [dict(e) for e in log.events[base:]]
    tampered[-1]["hash"] = "f" * 64
    result = verify_candidate(
        candidate=candidate,
        previous=previous,
        events=tampered,
        base_covered_until=base,
        boundary=log.last_seq,
        chain_hash_at_boundary=log.head,
        expected_chain_hash=log.head,
    )
    assert result.failed() == ["chain_hash"]


def test_every_check_but_the_chain_hash_has_a_defect_of_its_own() -> None:
    assert set(BREAKERS) | {"chain_hash"} == set(CHECK_NAMES)
