"""Every call the model reads comes with exactly one result (docs/api.md,
"Working context — `GET /api/v1/threads/{id}/context/`", docs/repairs.md,
"How the ledger drives resume").

The working context is what an agent hands its model, and chat APIs refuse a call without its
result (or a result without its call). The log may hold both: a run that died inside a
side-effecting tool leaves its call without a result, an operator's resolution settles it
later; a second result may arrive for a call that had one. `pair_calls` turns the events the
budget kept into what a model may read:

- a call that has no result but a resolution is followed, right after the call, by a result
  built from the resolution (`from_resolution`: the resolution's seq; its status and
  evidence), which takes the resolution's place;
- a second result of a call (flagged `duplicate_of` by the append) is left out: the model reads
  the call's first result only;
- a call with neither result nor resolution is listed in `unanswered` (its seq, id, tool, side
  effect and key) and stays in the events: the client decides (the Agents SDK session holds
  a side-effecting one as `SideEffectPending` and leaves a read-only one out of the model's
  input).

Pure: no Django, same input, same output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from threads.domain.ledger import DUPLICATE_OF

# The field of a result built from a resolution: the resolution's seq.
FROM_RESOLUTION = "from_resolution"


@dataclass
class PairedEvents:
    events: list[dict[str, Any]]
    unanswered: list[dict[str, Any]] = field(default_factory=list)


def resolution_result(
    resolution: Mapping[str, Any], call: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The tool_result a model reads for a call that an operator (or a status check) resolved:
    the resolution's status, and a result object naming who resolved it, with what evidence."""
    result = {
        "resolution": resolution.get("status"),
        "evidence": resolution.get("evidence", ""),
        "resolved_by": resolution.get("actor", ""),
        "note": "No result came back from the tool; this is the recorded outcome. Do not run "
        "the call again.",
    }
    event: dict[str, Any] = {
        "seq": resolution["seq"],
        "kind": "tool_result",
        "tool_call_id": resolution.get("tool_call_id"),
        "call_seq": resolution.get("call_seq"),
        "status": resolution.get("status"),
        "result": result,
        FROM_RESOLUTION: resolution["seq"],
    }
    for name in ("created_at", "token_count", "hash"):
        if name in resolution:
            event[name] = resolution[name]
    if call is not None:
        event["tool_name"] = call.get("tool_name")
    return event


def pair_calls(events: Sequence[Mapping[str, Any]]) -> PairedEvents:
    """The events as a model may read them (see the module's docstring), in order."""
    calls: dict[int, Mapping[str, Any]] = {}
    answered: set[int] = set()
    resolved: dict[int, Mapping[str, Any]] = {}
    for event in events:
        kind = event["kind"]
        if kind == "tool_call":
            calls[event["seq"]] = event
        elif kind == "tool_result" and DUPLICATE_OF not in event:
            answered.add(event.get("call_seq"))  # type: ignore[arg-type]
        elif kind == "side_effect_resolution":
            resolved.setdefault(event.get("call_seq"), event)  # type: ignore[arg-type]
    # The resolutions that stand for a result: of a call in the window that has none.
    standing = {
        seq: resolution
        for seq, resolution in resolved.items()
        if seq in calls and seq not in answered
    }
    moved = {resolution["seq"] for resolution in standing.values()}
    out: list[dict[str, Any]] = []
    unanswered: list[dict[str, Any]] = []
    for event in events:
        kind = event["kind"]
        if kind == "tool_result" and DUPLICATE_OF in event:
            continue
        if kind == "side_effect_resolution" and event["seq"] in moved:
            continue
        out.append(dict(event))
        if kind != "tool_call":
            continue
        seq = event["seq"]
        if seq in standing:
            out.append(resolution_result(standing[seq], event))
        elif seq not in answered:
            unanswered.append(
                {
                    "seq": seq,
                    "tool_call_id": event.get("tool_call_id"),
                    "tool_name": event.get("tool_name"),
                    "side_effect": bool(event.get("side_effect")),
                    "idempotency_key": event.get("idempotency_key"),
                }
            )
    return PairedEvents(out, unanswered)
