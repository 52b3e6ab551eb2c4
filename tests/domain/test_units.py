"""Interaction units: grouping across a late result and the fold boundary."""

from __future__ import annotations

from tests.domain.eventlog import Log
from threads.domain.units import last_closed_boundary, split_units, unit_groups


def spans(log: Log) -> list[list[tuple[int, int]]]:
    return [[(u.from_seq, u.to_seq) for u in g] for g in unit_groups(split_units(log.events))]


def test_units_start_at_user_messages() -> None:
    log = Log()
    log.add("message", role="system", content="be brief")
    log.user("u0")
    log.assistant("a0")
    log.user("u1")
    assert spans(log) == [[(1, 1)], [(2, 3)], [(4, 4)]]


def test_late_result_joins_units_into_one_group() -> None:
    log = Log()
    log.user("u0")
    log.call("c1")
    log.user("u1")
    log.result("c1")
    log.user("u2")
    assert spans(log) == [[(1, 2), (3, 4)], [(5, 5)]]


def test_resolution_after_timeout_does_not_link_units() -> None:
    log = Log()
    log.user("u0")
    call = log.call("r", "refund", side_effect=True)
    log.result("r", "timeout")
    log.user("u1")
    log.resolve(call["seq"], "succeeded")
    assert spans(log) == [[(1, 3)], [(4, 5)]]


def test_fold_boundary_never_separates_a_call_from_its_late_result() -> None:
    log = Log()
    log.user("u0")
    log.call("c1")
    log.user("u1")
    log.result("c1")
    log.call("c2")  # still open: the second unit is open
    units = split_units(log.events)
    assert units[0].closed and not units[1].closed
    # Unit 1 is closed, but its call's result lives in the open unit 2: nothing may be folded.
    assert last_closed_boundary(units) == 0
    log.result("c2")
    assert last_closed_boundary(split_units(log.events)) == log.last_seq
