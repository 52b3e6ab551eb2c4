"""Retractions and resets: markers that take events out of the working context while the log
stays append-only (docs/event-log.md, "Kinds", docs/api.md,
"Working context — `GET /api/v1/threads/{id}/context/`").

A `retraction` `{"retracts": seq}` takes the agent-visible item at `seq` out; a tool call and
its result are one, so retracting either side takes the pair, and a resolution of that call,
out with it. A `reset` takes out every earlier event. The markers themselves are never shown to
a model. Nothing here touches side-effect truth: records, statuses and approvals follow the
whole log (docs/event-log.md, "Four kinds of state").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

RETRACTION = "retraction"
RESET = "reset"
MARKER_KINDS = (RETRACTION, RESET)
# What a retraction may name: the items an agent wrote and a model reads.
RETRACTABLE_KINDS = ("message", "tool_call", "tool_result", "annotation", "approval_request")
# Events that belong to the tool call named by their `call_seq`.
_CALL_ANSWERS = ("tool_result", "side_effect_resolution")


def is_marker(event: Mapping[str, Any]) -> bool:
    return event["kind"] in MARKER_KINDS


def retraction_targets(events: Iterable[Mapping[str, Any]]) -> dict[int, int]:
    """target seq -> seq of the retraction that names it."""
    return {
        e["retracts"]: e["seq"]
        for e in events
        if e["kind"] == RETRACTION and isinstance(e.get("retracts"), int)
    }


def last_reset(events: Iterable[Mapping[str, Any]]) -> int | None:
    """Seq of the last reset among `events`, or None."""
    found = None
    for event in events:
        if event["kind"] == RESET:
            found = event["seq"]
    return found


@dataclass
class Withdrawn:
    """What leaves the working context among a window of events."""

    seqs: set[int] = field(default_factory=set)  # every event of the window left out
    reset_at: int | None = None  # the last reset in the window


def retracted_items(events: Sequence[Mapping[str, Any]]) -> set[int]:
    """Seqs among `events` that retractions among them take out, with the other side of a
    retracted call: the call of a retracted result, the result and any resolution of a
    retracted call. A tool call and its result are one item. Linear in the events."""
    targets = retraction_targets(events)
    if not targets:
        return set()
    calls: set[int] = set()
    for event in events:
        if event["seq"] not in targets:
            continue
        if event["kind"] == "tool_call":
            calls.add(event["seq"])
        elif event["kind"] == "tool_result" and isinstance(event.get("call_seq"), int):
            calls.add(event["call_seq"])
    out = set(targets)
    for event in events:
        if event["seq"] in calls or (
            event["kind"] in _CALL_ANSWERS and event.get("call_seq") in calls
        ):
            out.add(event["seq"])
    return out


def answered_calls(events: Iterable[Mapping[str, Any]], *, until: int) -> set[int]:
    """Seqs of the calls at or before `until` that a result or a resolution among `events`
    answers."""
    return {
        e["call_seq"]
        for e in events
        if e["kind"] in _CALL_ANSWERS
        and isinstance(e.get("call_seq"), int)
        and e["call_seq"] <= until
    }


def withdrawn(events: Sequence[Mapping[str, Any]]) -> Withdrawn:
    """The events of `events` (in seq order, a window of the log) that leave the working
    context: markers, retracted items with the other side of their call (`retracted_items`),
    and everything up to the last reset — with the results and resolutions of calls made
    before it, so that the context never holds half a call. Linear in the window."""
    reset_at = last_reset(events)
    retracted = retracted_items(events)
    out = Withdrawn(reset_at=reset_at)
    for event in events:
        seq = event["seq"]
        call_seq = event.get("call_seq") if event["kind"] in _CALL_ANSWERS else None
        if (
            is_marker(event)
            or seq in retracted
            or (reset_at is not None and seq <= reset_at)
            or (reset_at is not None and isinstance(call_seq, int) and call_seq <= reset_at)
        ):
            out.seqs.add(seq)
    return out


def visible_events(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Withdrawn]:
    """`events` without what `withdrawn` takes out, and what it took."""
    gone = withdrawn(events)
    if not gone.seqs:
        return events, gone
    return [e for e in events if e["seq"] not in gone.seqs], gone
