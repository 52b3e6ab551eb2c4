"""The ledger replay: what the log says about tool calls, side effects and approvals.

One replay for everything that derives call status or open work from the log: the fold's
`tool_state` and `pending` (and the llm backend's, which a model never decides), verification's
expected tool state, and the work a checkpoint records as open at its cursor. Call status: no
result ⇒ running; a result ⇒ RESULT_STATUS of its status (timeout ⇒ unknown, never failed); a
side_effect_resolution ⇒ the status it records. Pure: no Django, same input, same output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from threads.domain.entries import cap_text, copy_entries, json_text, last_n, merge_sources

MAX_ACTION_CHARS = 200
MAX_FINAL_TOOL_STATE = 100

TOOL_STATUSES = ("planned", "running", "succeeded", "failed", "cancelled", "unknown")
FINAL_TOOL_STATUSES = ("succeeded", "failed", "cancelled")
# A call's status after its result: the one map from a tool_result's status to a call's (and
# a side effect's) status.
RESULT_STATUS = {
    "succeeded": "succeeded",
    "failed": "failed",
    "cancelled": "cancelled",
    # A timeout says nothing about whether the call took effect.
    "timeout": "unknown",
}
# The field the append adds to a second tool_result of a call that has one already: the seq of
# the call's first result (docs/event-log.md, "Idempotency and binding"). Such a result is kept and
# flagged; it never moves the call's status.
DUPLICATE_OF = "duplicate_of"
# A side effect is still open (pending) while its call has one of these statuses.
OPEN_CALL_STATUSES = ("running", "unknown")


def call_status_after(kind: str, status: str | None) -> str:
    """A call's status after a tool_result (`kind` "tool_result", its result status) or a
    side_effect_resolution (the status it records)."""
    if kind == "tool_result":
        return RESULT_STATUS.get(status or "", "unknown")
    return status if status is not None else "unknown"


# --- tool state --------------------------------------------------------------------------------


def _tool_entry_from_call(event: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "tool_call_id": event["tool_call_id"],
        "tool": event["tool_name"],
        "idempotency_key": event.get("idempotency_key"),
        "side_effect": bool(event.get("side_effect")),
        "status": "running",
        "action": cap_text(
            f"{event['tool_name']} {json_text(event.get('arguments', {}))}", MAX_ACTION_CHARS
        )[0],
        "call_seq": event["seq"],
        "result_seq": None,
        "source_event_ids": [event["seq"]],
    }


def apply_tool_event(
    tools: dict[int, dict[str, Any]], event: Mapping[str, Any]
) -> dict[str, Any] | None:
    """Update the tool state for one event; return the entry if its status became final."""
    kind = event["kind"]
    if kind == "tool_call":
        tools[event["seq"]] = _tool_entry_from_call(event)
        return None
    if kind not in ("tool_result", "side_effect_resolution"):
        return None
    call_seq = event.get("call_seq")
    if call_seq is None or DUPLICATE_OF in event:
        return None
    entry = tools.get(call_seq)
    if entry is None:
        # The call fell out of the capped list long ago (or predates the summary): rebuild
        # what the event itself says so the news is not lost.
        entry = {
            "tool_call_id": event.get("tool_call_id"),
            "tool": event.get("tool_name", ""),
            "idempotency_key": event.get("idempotency_key"),
            "side_effect": kind == "side_effect_resolution",
            "status": "running",
            "action": str(event.get("tool_name") or event.get("tool_call_id")),
            "call_seq": call_seq,
            "result_seq": None,
            "source_event_ids": [],
        }
        tools[call_seq] = entry
    else:
        entry = dict(entry)
        tools[call_seq] = entry
    before = entry["status"]
    entry["status"] = call_status_after(kind, event.get("status"))
    if kind == "tool_result":
        entry["result_seq"] = event["seq"]
    else:
        entry["resolved_seq"] = event["seq"]
    entry["source_event_ids"] = merge_sources(entry["source_event_ids"], [event["seq"]])
    if entry["status"] == "succeeded" and before != "succeeded":
        return entry
    return None


def _settled(entry: Mapping[str, Any]) -> bool:
    """Nothing can change this entry any more, short of an operator's resolution."""
    if entry["status"] in FINAL_TOOL_STATUSES:
        return True
    # Only side effects get resolved; an unknown read-only call stays unknown for good.
    return entry["status"] == "unknown" and not entry.get("side_effect")


def cap_tool_state(
    tools: dict[int, dict[str, Any]], fresh_from: int
) -> tuple[list[dict[str, Any]], int]:
    """Every call still in flight or with an unknown side effect, and the last
    MAX_FINAL_TOOL_STATE settled ones (by their latest event). A side-effecting call made in
    the range being folded (seq >= fresh_from) is never dropped: verification insists that
    every side effect in the range is cited. A later fold may drop it."""
    final = sorted(
        (s for s, e in tools.items() if _settled(e)),
        key=lambda s: (tools[s]["source_event_ids"][-1] if tools[s]["source_event_ids"] else s, s),
    )
    kept, _ = last_n(
        [tools[s] for s in final],
        MAX_FINAL_TOOL_STATE,
        lambda e: bool(e.get("side_effect")) and e["call_seq"] >= fresh_from,
    )
    keep = {e["call_seq"] for e in kept}
    dropped = {s for s in final if s not in keep}
    return [tools[s] for s in sorted(tools) if s not in dropped], len(dropped)


def fresh_from(events: Sequence[Mapping[str, Any]]) -> int:
    """First seq of the range being folded (past every seq when there is nothing new)."""
    return int(events[0]["seq"]) if events else 1 << 62


def tool_state_from_log(
    *, previous: Mapping[str, Any] | None, events: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Tool state recomputed from the log: previous content's tool_state + these events.

    Used by the fold, by verification and by the llm backend — a model never decides whether
    a call succeeded. Call status: no result ⇒ running; result ⇒ its status, with timeout ⇒
    unknown; a side_effect_resolution sets the status it records.
    """
    tools = {
        int(e["call_seq"]): e
        for e in copy_entries(previous, "tool_state")
        if isinstance(e.get("call_seq"), int)
    }
    for event in events:
        apply_tool_event(tools, event)
    return cap_tool_state(tools, fresh_from(events))[0]


# --- approvals and pending ---------------------------------------------------------------------


def approval_entry(event: Mapping[str, Any]) -> dict[str, Any]:
    seq = event["seq"]
    return {
        "kind": "approval",
        "ref": f"approval #{seq}: {event.get('action', '')}",
        "blocking": True,
        "approval_seq": seq,
        "action": event.get("action", ""),
        "source_event_ids": [seq],
    }


def previous_approvals(previous: Mapping[str, Any] | None) -> dict[int, dict[str, Any]]:
    return {
        int(p["approval_seq"]): p
        for p in copy_entries(previous, "pending")
        if p.get("kind") == "approval" and isinstance(p.get("approval_seq"), int)
    }


def pending_from_log(
    *, previous: Mapping[str, Any] | None, events: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The `pending` entries the log determines (approvals not yet decided, tool calls with no
    result, side effects with an unknown outcome), without questions: what the llm backend
    may not leave out or invent."""
    approvals = previous_approvals(previous)
    for event in events:
        if event["kind"] == "approval_request":
            approvals[event["seq"]] = approval_entry(event)
        elif event["kind"] == "approval_decision" and isinstance(event.get("approval_seq"), int):
            approvals.pop(event["approval_seq"], None)
    tool_state = tool_state_from_log(previous=previous, events=events)
    return pending_entries(approvals=approvals, tool_state=tool_state, questions=[])


def pending_entries(
    *,
    approvals: Mapping[int, dict[str, Any]],
    tool_state: list[dict[str, Any]],
    questions: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """`pending`: undecided approvals, then tool calls with no result and side effects whose
    outcome is unknown (both blocking), then open questions (not blocking)."""
    pending: list[dict[str, Any]] = [approvals[s] for s in sorted(approvals)]
    for entry in tool_state:
        if entry["status"] == "unknown" and entry.get("side_effect"):
            pending.append(
                {
                    "kind": "side_effect",
                    "ref": f"{entry['tool']}#{entry['tool_call_id']}",
                    "blocking": True,
                    "tool_call_id": entry["tool_call_id"],
                    "call_seq": entry["call_seq"],
                    "idempotency_key": entry.get("idempotency_key"),
                    "source_event_ids": list(entry["source_event_ids"]),
                }
            )
        elif entry["status"] == "running":
            pending.append(
                {
                    "kind": "tool_call",
                    "ref": f"{entry['tool']}#{entry['tool_call_id']}",
                    "blocking": True,
                    "tool_call_id": entry["tool_call_id"],
                    "call_seq": entry["call_seq"],
                    "source_event_ids": list(entry["source_event_ids"]),
                }
            )
    for question in questions:
        pending.append(
            {
                "kind": "question",
                "ref": question["text"][:200],
                "blocking": False,
                "source_event_ids": list(question["source_event_ids"]),
            }
        )
    return pending


# The summary's task.last_activity after a side_effect_resolution: a person's act, not the
# agent's. The agent resumes (with the resolution as the call's result) only when someone
# runs it again, so the task waits for that, as after the agent's own reply.
RESOLVED = "resolution"


def task_status(
    *, pending: list[dict[str, Any]], tool_state: list[dict[str, Any]], last_activity: str | None
) -> str:
    """The task's status from the ledger: an open approval, then an unknown side effect,
    then a call still running; else what the last activity leaves the task waiting for."""
    if any(p["kind"] == "approval" for p in pending):
        return "waiting_for_approval"
    if any(t["status"] == "unknown" and t.get("side_effect") for t in tool_state):
        return "unknown"
    if any(t["status"] == "running" for t in tool_state):
        return "running"
    if last_activity in ("assistant", RESOLVED):
        return "waiting_for_user"
    if last_activity is None:
        return "planned"
    return "running"


# --- open work at a cursor (checkpoints) -------------------------------------------------------


@dataclass
class OpenWork:
    """Side effects and approvals still open, replayed event by event from what was open at
    an earlier point: a side effect while its call's status is in OPEN_CALL_STATUSES, an
    approval while its request has no decision. Entries are keyed by call seq and request seq."""

    effects: dict[int, dict[str, Any]] = field(default_factory=dict)
    approvals: dict[int, dict[str, Any]] = field(default_factory=dict)

    def call(self, seq: int) -> None:
        """A side-effecting call: open and running."""
        self.effects[seq] = {"kind": "side_effect", "call_seq": seq, "status": "running"}

    def answer(self, kind: str, call_seq: Any, status: str | None) -> None:
        """A tool_result or side_effect_resolution for `call_seq`. Only a running call takes a
        result: one that finds it unknown (after a timeout) is a second result
        (DUPLICATE_OF), which never moves the outcome."""
        entry = self.effects.get(call_seq)
        if entry is None or (kind == "tool_result" and entry["status"] != "running"):
            return
        after = call_status_after(kind, status)
        if after in OPEN_CALL_STATUSES:
            entry["status"] = after
        else:
            self.effects.pop(call_seq)

    def request(self, seq: int) -> None:
        self.approvals[seq] = {"kind": "approval", "request_seq": seq}

    def decide(self, request_seq: Any) -> None:
        self.approvals.pop(request_seq, None)

    def entries(self) -> list[dict[str, Any]]:
        """Side effects by call seq, then approvals by request seq, each with its keys sorted
        (one key order however an entry was built: checksums cover it)."""
        ordered = [self.effects[s] for s in sorted(self.effects)] + [
            self.approvals[s] for s in sorted(self.approvals)
        ]
        return [dict(sorted(entry.items())) for entry in ordered]
