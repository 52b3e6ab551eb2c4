"""What the log says, for the checks that read a candidate's entries against it
(threads.domain.verify): the Ledger, built from the previous summary and the folded events, and
what those checks share (an entry's sources, whether the previous summary carries it as it is,
a call's name in a problem).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from threads.domain.claims import CallRef
from threads.domain.entries import section_entries
from threads.domain.ledger import pending_from_log, tool_state_from_log
from threads.domain.verify_report import _is_int

# --- claims against the ledger (docs/pipeline.md, "Verify")
# -------------------------------------------


@dataclass
class Ledger:
    """What the log says, for the claim checks: every call with its status (the ledger replay),
    the open work, the approvals' verdicts and every event a check may read (the folded ones
    and the older ones the candidate cites, when the caller supplied them)."""

    calls: list[CallRef]
    by_seq: dict[int, CallRef]
    events: dict[int, Mapping[str, Any]]
    folded: list[Mapping[str, Any]]
    pending: list[dict[str, Any]]
    verdicts: dict[int, str]  # approval request seq -> "approve" | "reject"
    previous: Mapping[str, Any] | None

    def visible(self, entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        sources = entry.get("source_event_ids")
        if not isinstance(sources, list):
            return []
        return [self.events[s] for s in sources if _is_int(s) and s in self.events]

    def all_visible(self, entry: Mapping[str, Any]) -> bool:
        sources = entry.get("source_event_ids")
        return isinstance(sources, list) and all(_is_int(s) and s in self.events for s in sources)

    def call_of(self, event: Mapping[str, Any]) -> CallRef | None:
        if event.get("kind") == "tool_call":
            return self.by_seq.get(event["seq"])
        if event.get("kind") in ("tool_result", "side_effect_resolution"):
            call_seq = event.get("call_seq")
            return self.by_seq.get(call_seq) if _is_int(call_seq) else None
        return None


def build_ledger(
    previous: Mapping[str, Any] | None,
    events: Sequence[Mapping[str, Any]],
    cited_events: Mapping[int, Mapping[str, Any]] | None = None,
) -> Ledger:
    state = tool_state_from_log(previous=previous, events=list(events))
    calls = [
        CallRef(
            call_seq=int(e["call_seq"]),
            tool=str(e.get("tool") or ""),
            tool_call_id=str(e.get("tool_call_id") or ""),
            status=str(e.get("status")),
            side_effect=bool(e.get("side_effect")),
        )
        for e in state
        if _is_int(e.get("call_seq"))
    ]
    visible: dict[int, Mapping[str, Any]] = dict(cited_events or {})
    visible.update({e["seq"]: e for e in events})
    verdicts: dict[int, str] = {}
    for entry in section_entries(previous or {}, "decisions"):
        if _is_int(entry.get("approval_seq")) and isinstance(entry.get("decision"), str):
            verdicts[entry["approval_seq"]] = entry["decision"]
    for event in sorted(visible.values(), key=lambda e: e["seq"]):
        if event.get("kind") == "approval_decision" and _is_int(event.get("approval_seq")):
            verdicts[event["approval_seq"]] = str(event.get("decision"))
    return Ledger(
        calls=calls,
        by_seq={c.call_seq: c for c in calls},
        events=visible,
        folded=list(events),
        pending=pending_from_log(previous=previous, events=list(events)),
        verdicts=verdicts,
        previous=previous,
    )


def _sources(entry: Mapping[str, Any]) -> list[Any]:
    sources = entry.get("source_event_ids")
    return sources if isinstance(sources, list) else []


def _carried(previous: Mapping[str, Any] | None, section: str, entry: Mapping[str, Any]) -> bool:
    """The entry stands in the previous (verified) summary as it is: it was checked then."""
    return previous is not None and any(entry == old for old in section_entries(previous, section))


def _call_label(call: CallRef) -> str:
    return f"{call.tool}#{call.tool_call_id} (call #{call.call_seq}, {call.status})"
