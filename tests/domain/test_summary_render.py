"""The rendered summary: sections, citations, determinism."""

from __future__ import annotations

from hypothesis import given, settings

from tests.domain.eventlog import Log
from tests.domain.strategies import logs
from threads.domain.fold import fold_structured
from threads.domain.summary_render import render_summary
from threads.domain.units import last_closed_boundary, split_units


def test_sections_and_citations() -> None:
    log = Log()
    log.user("Refund order 10086")
    log.annotate("constraint", "user", {"text": "at most 50 EUR"})
    log.call("r1", "refund", side_effect=True, key="idem-1")
    log.result("r1", "timeout")
    log.fact("order.total", 70, "user")
    log.assistant("the refund timed out; checking")
    content = fold_structured(
        previous=None, events=log.events, covered_from=1, covered_until=log.last_seq
    )
    text = render_summary(content)
    assert text.startswith("# Summary of events #1–#6\n")
    lines = text.splitlines()
    for heading in (
        "## Goal",
        "## Constraints",
        "## Facts",
        "## Tool state",
        "## Pending",
        "## Requests",
        "## Last replies",
    ):
        assert heading in lines
    assert "- at most 50 EUR [#2]" in lines
    assert "- order.total = 70 (user, confirmed) [#5]" in lines
    assert "- refund#r1: unknown side effect key=idem-1 [#3][#4]" in lines
    assert "- side_effect: refund#r1 (blocking) [#3][#4]" in lines
    assert "## Decisions" not in lines  # empty sections are left out


def test_dropped_material_is_announced() -> None:
    content = fold_structured(previous=None, events=[], covered_from=1, covered_until=0)
    content["counts"] = {"requests_dropped": 7, "events_folded": 100}
    text = render_summary(content)
    assert "- requests: 7" in text.splitlines()
    assert "events folded" not in text


@settings(max_examples=50, deadline=None)
@given(log=logs())
def test_render_is_deterministic(log: Log) -> None:
    until = last_closed_boundary(split_units(log.events))
    content = fold_structured(
        previous=None, events=log.events[:until], covered_from=1, covered_until=until
    )
    again = fold_structured(
        previous=None,
        events=[dict(e) for e in log.events[:until]],
        covered_from=1,
        covered_until=until,
    )
    assert render_summary(content) == render_summary(again)
    for seq in {
        s for f in content["facts"] if f["status"] == "active" for s in f["source_event_ids"]
    }:
        assert f"[#{seq}]" in render_summary(content)
