"""Budget arithmetic, trimming by whole closed units, pinning, and the capacity trigger."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.domain.eventlog import Log
from tests.domain.strategies import logs
from threads.domain.budget import Budget, fold_target, needs_fold, plan_context
from threads.domain.errors import BudgetTooSmall
from threads.domain.units import split_units


def seqs(events: list[dict[str, Any]]) -> list[int]:
    return [e["seq"] for e in events]


def test_available_is_window_minus_every_reserve() -> None:
    budget = Budget(
        window=16000, fixed=1200, reserved_output=2000, reasoning_reserve=300, safety_margin=500
    )
    assert budget.available == 16000 - 1200 - 2000 - 300 - 500


def test_nothing_trimmed_when_it_fits() -> None:
    log = Log()
    log.user("a", token_count=100)
    log.assistant("b", token_count=100)
    plan = plan_context(
        events=log.events, summary_tokens=50, budget=Budget(window=1000), high=0.8, low=0.5
    )
    assert seqs(plan.events) == [1, 2] and plan.trimmed_units == []
    assert plan.used == 250 and plan.sections == {"summary": 50, "events": 200}
    assert plan.needs_fold is False


def test_oldest_closed_units_trimmed_first_with_reason() -> None:
    log = Log()
    for i in range(4):
        log.user(f"u{i}", token_count=100)
        log.assistant(f"a{i}", token_count=100)
    plan = plan_context(
        events=log.events, summary_tokens=0, budget=Budget(window=500), high=0.8, low=0.5
    )
    assert [(t["from_seq"], t["to_seq"], t["tokens"]) for t in plan.trimmed_units] == [
        (1, 2, 200),
        (3, 4, 200),
    ]
    assert plan.trimmed_units[0]["reason"] == "oldest closed unit; budget over by 300 tokens"
    assert seqs(plan.events) == [5, 6, 7, 8]
    assert plan.used == 400 and plan.needs_fold is True


def test_open_unit_is_pinned_and_later_closed_unit_trimmed() -> None:
    log = Log()
    log.user("u0", token_count=100)
    log.call("slow", token_count=100)  # no result yet: unit 1 is open
    log.user("u1", token_count=100)
    log.assistant("a1", token_count=100)
    log.user("u2", token_count=100)
    plan = plan_context(events=log.events, summary_tokens=0, budget=Budget(window=350))
    assert seqs(plan.events) == [1, 2, 5]
    assert [(t["from_seq"], t["to_seq"]) for t in plan.trimmed_units] == [(3, 4)]


def test_late_result_links_units_into_one_trimming_group() -> None:
    log = Log()
    log.user("u0", token_count=100)
    log.call("c1", token_count=10)
    log.user("u1: are you done?", token_count=100)  # the user spoke before the result came
    log.result("c1", token_count=10)
    log.assistant("a1", token_count=100)
    log.user("u2", token_count=100)
    plan = plan_context(events=log.events, summary_tokens=0, budget=Budget(window=150))
    # Trimming unit 1..2 alone would orphan the call or the result: both go, together.
    assert [(t["from_seq"], t["to_seq"]) for t in plan.trimmed_units] == [(1, 2), (3, 5)]
    assert "across them" in plan.trimmed_units[0]["reason"]
    assert seqs(plan.events) == [6]


def test_unknown_side_effect_unit_is_pinned() -> None:
    log = Log()
    log.user("refund", token_count=100)
    log.call("r1", "refund", side_effect=True, token_count=10)
    log.result("r1", "timeout", token_count=10)
    log.user("u1", token_count=100)
    log.user("u2", token_count=100)
    plan = plan_context(events=log.events, summary_tokens=0, budget=Budget(window=230))
    assert seqs(plan.events) == [1, 2, 3, 5]
    assert any(p["why"] == "side effect with unknown outcome" for p in plan.pinned_units)


def test_budget_too_small_names_the_numbers() -> None:
    log = Log()
    log.user("old", token_count=100)
    log.user("current turn", token_count=400)
    with pytest.raises(BudgetTooSmall) as caught:
        plan_context(
            events=log.events,
            summary_tokens=200,
            budget=Budget(window=1000, fixed=300, reserved_output=200),
        )
    fields = caught.value.fields
    assert fields["available"] == 500 and fields["summary"] == 200
    assert fields["pinned_events"] == 400 and fields["pinned"] == 600
    assert fields["fixed"] == 300 and fields["window"] == 1000


def test_fold_target_reaches_low_watermark() -> None:
    log = Log()
    for i in range(5):
        log.user(f"u{i}", token_count=100)
    budget = Budget(window=1000)
    # 500 tokens of history; low × B = 250 → fold until only two units (200) remain.
    assert fold_target(events=log.events, summary_tokens=50, budget=budget, low=0.25) == 3
    assert fold_target(events=log.events, summary_tokens=0, budget=budget, low=0.0) == 5


def test_fold_target_stops_before_open_unit() -> None:
    log = Log()
    log.user("u0", token_count=100)
    log.user("u1", token_count=100)
    log.call("open", token_count=100)
    log.user("u2", token_count=100)
    assert fold_target(events=log.events, summary_tokens=0, budget=Budget(window=100), low=0.1) == 1
    log2 = Log()
    log2.user("u0")
    log2.call("open")
    assert fold_target(events=log2.events, summary_tokens=0, budget=Budget(window=10)) is None


@settings(max_examples=200, deadline=None)
@given(
    log=logs(max_ops=50),
    summary_tokens=st.integers(min_value=0, max_value=2000),
    window=st.integers(min_value=0, max_value=8000),
    fixed=st.integers(min_value=0, max_value=1000),
)
def test_plan_context_properties(log: Log, summary_tokens: int, window: int, fixed: int) -> None:
    budget = Budget(window=window, fixed=fixed, safety_margin=50)
    events = log.events
    try:
        plan = plan_context(
            events=events, summary_tokens=summary_tokens, budget=budget, high=0.8, low=0.5
        )
    except BudgetTooSmall as exc:
        assert exc.fields["pinned"] > exc.fields["available"]
        return
    kept = set(seqs(plan.events))
    in_window = {e["seq"]: e for e in events}
    # Within budget, and the numbers add up.
    assert plan.used <= budget.available
    assert plan.used == summary_tokens + sum(e["token_count"] for e in plan.events)
    assert plan.needs_fold == (
        summary_tokens + sum(e["token_count"] for e in events) > 0.8 * budget.available
    )
    # Kept + trimmed = everything, in order, and trimmed units are whole.
    trimmed = {s for t in plan.trimmed_units for s in range(t["from_seq"], t["to_seq"] + 1)}
    assert kept | trimmed == set(in_window) and not kept & trimmed
    assert seqs(plan.events) == sorted(kept)
    # No orphan: a kept result keeps its call, a kept call keeps its result.
    for event in events:
        if event["kind"] == "tool_result":
            assert (event["seq"] in kept) == (event["call_seq"] in kept)
    # Open units are never trimmed, nor is the current turn.
    units = split_units(events)
    for unit in units:
        if not unit.closed:
            assert all(e["seq"] in kept for e in unit.events)
    if units:
        assert all(e["seq"] in kept for e in units[-1].events)


def test_needs_fold_is_the_high_watermark() -> None:
    budget = Budget(window=1000, fixed=200)  # B = 800, high × B = 640
    assert needs_fold(history=641, budget=budget, high=0.8) is True
    assert needs_fold(history=640, budget=budget, high=0.8) is False


def test_closed_calls_from_outside_the_window_make_a_unit_trimmable() -> None:
    log = Log()
    log.user("u0", token_count=100)
    call = log.call("c1", token_count=100)
    log.user("u1", token_count=100)
    budget = Budget(window=150)
    with pytest.raises(BudgetTooSmall):
        plan_context(events=log.events, summary_tokens=0, budget=budget)
    plan = plan_context(
        events=log.events, summary_tokens=0, budget=budget, closed_calls={call["seq"]}
    )
    assert seqs(plan.events) == [3]
