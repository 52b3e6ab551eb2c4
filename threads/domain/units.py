"""Interaction units (docs/event-log.md, "Interaction units"): the atoms of trimming and folding.

A unit starts at a user message and holds everything the agent did in answer to it, up to the
next user message. Events before the first user message (system prompt, setup) form a leading
unit of their own. A unit is closed when every tool call in it has a result or a resolution.
Retraction and reset markers (threads.domain.markers) sit in the unit they fall in and neither
open nor close one; a retracted user message does not start a unit. A retracted call still
keeps its unit open until it has a result: retraction changes what the agent sees, not what
the tool did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from threads.domain.markers import retraction_targets


@dataclass
class Unit:
    from_seq: int
    to_seq: int
    events: list[Mapping[str, Any]] = field(default_factory=list)
    open_calls: set[int] = field(default_factory=set)  # seqs of calls with no result yet
    tokens: int = 0

    @property
    def closed(self) -> bool:
        return not self.open_calls

    @property
    def has_side_effect(self) -> bool:
        return any(e["kind"] == "tool_call" and e.get("side_effect") for e in self.events)


def _is_user_message(event: Mapping[str, Any]) -> bool:
    return event["kind"] == "message" and event.get("role") == "user"


def split_units(
    events: Iterable[Mapping[str, Any]], *, closed_calls: set[int] | None = None
) -> list[Unit]:
    """Group events (in seq order) into units.

    A tool_result closes the call whose seq it names in `call_seq`; a side_effect_resolution
    closes the call it names too. `closed_calls` adds calls closed by events outside `events`
    (for instance a result that came later than the window being split).
    """
    units: list[Unit] = []
    call_unit: dict[int, Unit] = {}
    closed = set(closed_calls or ())
    events = list(events)
    retracted = retraction_targets(events)
    for event in events:
        if not units or (_is_user_message(event) and event["seq"] not in retracted):
            units.append(Unit(from_seq=event["seq"], to_seq=event["seq"]))
        unit = units[-1]
        unit.events.append(event)
        unit.to_seq = event["seq"]
        unit.tokens += int(event.get("token_count", 0))
        kind = event["kind"]
        if kind == "tool_call":
            if event["seq"] not in closed:
                unit.open_calls.add(event["seq"])
                call_unit[event["seq"]] = unit
        elif kind in ("tool_result", "side_effect_resolution"):
            call_seq = event.get("call_seq")
            if call_seq is not None and call_seq in call_unit:
                call_unit.pop(call_seq).open_calls.discard(call_seq)
    return units


def unit_groups(units: list[Unit]) -> list[list[Unit]]:
    """Consecutive units that must be trimmed (or folded) together.

    A call's result may sit in a later unit (the user spoke before the result came). Cutting
    between those two units would separate the call from its result, so every unit from the
    call's unit to the result's unit joins one group. Linear in the number of events.
    (The result names its call by `call_seq`; a resolution of a call with no result yet
    closes it the same way.)
    """
    unit_of: dict[int, int] = {}  # call seq -> index of the unit holding the call
    reach: list[int] = []  # per unit: the index of the last unit it must stay with
    for index, unit in enumerate(units):
        reach.append(index)
        for event in unit.events:
            kind = event["kind"]
            if kind == "tool_call":
                unit_of[event["seq"]] = index
            elif kind in ("tool_result", "side_effect_resolution"):
                # Only the event that closes the call links units: a resolution of a call that
                # already has a (timeout) result is news about the call, not its answer.
                call_seq = event.get("call_seq")
                start = unit_of.pop(call_seq, None) if call_seq is not None else None
                if start is not None and start < index:
                    reach[start] = max(reach[start], index)
    groups: list[list[Unit]] = []
    end = -1
    for index, unit in enumerate(units):
        if index > end:
            groups.append([])
        groups[-1].append(unit)
        end = max(end, reach[index])
    return groups


def last_closed_boundary(units: list[Unit], *, after: int = 0) -> int:
    """End seq of the last closed unit such that every unit before it is closed too.

    Folding stops here: an open unit is never summarised, and nothing after it is either,
    so that the summary's range stays a prefix of the log. The boundary also never falls
    inside a group (see `unit_groups`): a call and a result that answers it from a later unit
    are folded together or not at all.
    """
    boundary = after
    for group in unit_groups(units):
        if not all(unit.closed for unit in group):
            break
        boundary = group[-1].to_seq
    return boundary
