"""The structured fold (DESIGN §5.2): previous summary content + events → new content.

Deterministic and rolling: `fold_structured(previous=fold(1..c), events=(c, R])` gives the same
content as folding `1..R` at once, for any split at closed-unit boundaries. The work depends only
on the previous content and the new events, never on the length of the thread, because the
content is bounded:

- `requests` keeps the last MAX_REQUESTS user messages (each capped at MAX_REQUEST_CHARS);
- `completed_actions` keeps the last MAX_COMPLETED_ACTIONS succeeded calls;
- `tool_state` keeps every call still running and every side effect whose outcome is unknown,
  and the last MAX_FINAL_TOOL_STATE settled calls (a final status, or a read-only call that
  timed out, which nothing will ever resolve);
- `facts` keeps one active fact per key and the last MAX_SUPERSEDED_FACTS superseded ones;
- `decisions`, `open_questions`, `last_replies` keep their last MAX_* entries.

What falls out of a capped list is counted in `counts` (`requests_dropped`, ...), so the summary
says that older material exists in the log. Constraints are never dropped, and neither is, within
the fold that covers it, an entry citing a side-effecting call or a correction (verification
requires those to be cited); a later fold may drop it. Rolling equals folding at once as long as
no cap is reached; past a cap both keep the newest entries, but which old ones remain may differ.

Rules: tool state comes from calls, results and side_effect_resolution events (a timeout is
`unknown`, never `failed`); facts come from fact/correction annotations and tool results'
`verified_facts`; among confirmed facts (authority user, tool or operator) the latest observation
of a key wins and the replaced entry stays in the list as `superseded`, its value carried as the
new entry's `previous_value`; a model-authority fact never overrides a confirmed one: the guess
goes to `open_questions` with its source. Every entry cites `source_event_ids` (event seqs).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Any

from threads.domain.render import content_text

SCHEMA_VERSION = 1
MAX_REQUESTS = 50
MAX_REQUEST_CHARS = 2000
MAX_REPLY_CHARS = 1000
MAX_GOAL_CHARS = 500
MAX_ACTION_CHARS = 200
MAX_COMPLETED_ACTIONS = 50
MAX_FINAL_TOOL_STATE = 100
MAX_SUPERSEDED_FACTS = 50
MAX_DECISIONS = 50
MAX_OPEN_QUESTIONS = 50
MAX_LAST_REPLIES = 10
MAX_SOURCES_PER_ENTRY = 20

CONFIRMED_AUTHORITIES = ("user", "tool", "operator")
TASK_STATUSES = (
    "planned",
    "running",
    "waiting_for_user",
    "waiting_for_approval",
    "succeeded",
    "failed",
    "cancelled",
    "unknown",
)
TOOL_STATUSES = ("planned", "running", "succeeded", "failed", "cancelled", "unknown")
FINAL_TOOL_STATUSES = ("succeeded", "failed", "cancelled")
RESULT_STATUS = {
    "succeeded": "succeeded",
    "failed": "failed",
    "cancelled": "cancelled",
    # A timeout says nothing about whether the call took effect.
    "timeout": "unknown",
}
PENDING_KINDS = ("approval", "tool_call", "side_effect", "question")
SECTIONS = (
    "requests",
    "constraints",
    "facts",
    "tool_state",
    "completed_actions",
    "pending",
    "decisions",
    "open_questions",
    "last_replies",
)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _cap(text: str, limit: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)


def _sources(*groups: Iterable[int], keep: Container[int] = ()) -> list[int]:
    """Sorted unique seqs; an entry observed very often keeps its first and latest sources,
    and every seq in `keep` (events verification insists are cited)."""
    seqs = sorted({s for group in groups for s in group})
    if len(seqs) > MAX_SOURCES_PER_ENTRY:
        ends = set(seqs[:1] + seqs[-(MAX_SOURCES_PER_ENTRY - 1) :])
        seqs = [s for s in seqs if s in ends or s in keep]
    return seqs


def _last_n(
    entries: list[dict[str, Any]],
    limit: int,
    protected: Callable[[Mapping[str, Any]], bool] = lambda entry: False,
) -> tuple[list[dict[str, Any]], int]:
    """The newest `limit` entries (entries are in log order); protected entries are never
    dropped, so the list may stay longer than `limit` until a later fold."""
    excess = len(entries) - limit
    if excess <= 0:
        return entries, 0
    kept: list[dict[str, Any]] = []
    dropped = 0
    for entry in entries:
        if dropped < excess and not protected(entry):
            dropped += 1
        else:
            kept.append(entry)
    return kept, dropped


def _copy_entries(previous: Mapping[str, Any] | None, section: str) -> list[dict[str, Any]]:
    if not previous:
        return []
    return [dict(e) for e in previous.get(section) or [] if isinstance(e, dict)]


# --- tool state --------------------------------------------------------------------------------


def _tool_entry_from_call(event: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "tool_call_id": event["tool_call_id"],
        "tool": event["tool_name"],
        "idempotency_key": event.get("idempotency_key"),
        "side_effect": bool(event.get("side_effect")),
        "status": "running",
        "action": _cap(
            f"{event['tool_name']} {_json(event.get('arguments', {}))}", MAX_ACTION_CHARS
        )[0],
        "call_seq": event["seq"],
        "result_seq": None,
        "source_event_ids": [event["seq"]],
    }


def _apply_tool_event(
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
    if call_seq is None:
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
    if kind == "tool_result":
        entry["status"] = RESULT_STATUS.get(event.get("status", ""), "unknown")
        entry["result_seq"] = event["seq"]
    else:
        entry["status"] = event.get("status", "unknown")
        entry["resolved_seq"] = event["seq"]
    entry["source_event_ids"] = _sources(entry["source_event_ids"], [event["seq"]])
    if entry["status"] == "succeeded" and before != "succeeded":
        return entry
    return None


def _settled(entry: Mapping[str, Any]) -> bool:
    """Nothing can change this entry any more, short of an operator's resolution."""
    if entry["status"] in FINAL_TOOL_STATUSES:
        return True
    # Only side effects get resolved; an unknown read-only call stays unknown for good.
    return entry["status"] == "unknown" and not entry.get("side_effect")


def _cap_tool_state(
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
    kept, _ = _last_n(
        [tools[s] for s in final],
        MAX_FINAL_TOOL_STATE,
        lambda e: bool(e.get("side_effect")) and e["call_seq"] >= fresh_from,
    )
    keep = {e["call_seq"] for e in kept}
    dropped = {s for s in final if s not in keep}
    return [tools[s] for s in sorted(tools) if s not in dropped], len(dropped)


def _fresh_from(events: Sequence[Mapping[str, Any]]) -> int:
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
        for e in _copy_entries(previous, "tool_state")
        if isinstance(e.get("call_seq"), int)
    }
    for event in events:
        _apply_tool_event(tools, event)
    return _cap_tool_state(tools, _fresh_from(events))[0]


# --- facts -------------------------------------------------------------------------------------


class _Facts:
    """Active facts by key + superseded ones, with the rules of DESIGN §5.2."""

    def __init__(self, previous: Mapping[str, Any] | None, questions: list[dict[str, Any]]) -> None:
        self.active: dict[str, dict[str, Any]] = {}
        self.superseded: list[dict[str, Any]] = []
        for entry in _copy_entries(previous, "facts"):
            if entry.get("status") == "active" and isinstance(entry.get("key"), str):
                self.active[entry["key"]] = entry
            else:
                self.superseded.append(entry)
        self.questions = questions  # where a conflicting model guess goes, in log order
        self.corrections: set[int] = set()  # correction seqs of this fold: always cited

    def observe(
        self, *, key: str, value: Any, authority: str, seq: int, observed_at: str, kind: str
    ) -> None:
        confirmed = authority in CONFIRMED_AUTHORITIES
        if kind == "correction":
            self.corrections.add(seq)
        current = self.active.get(key)
        # Compared as JSON: 1 and true are different observations.
        if current is not None and _json(current["value"]) == _json(value):
            # Re-observation of the same value: cite it and refresh; a confirmation upgrades
            # a guess, a guess never downgrades a confirmation.
            refreshed = dict(current)
            refreshed["source_event_ids"] = _sources(
                current["source_event_ids"], [seq], keep=self.corrections
            )
            if confirmed or current["confidence"] != "confirmed":
                refreshed["observed_at"] = observed_at
            if confirmed and current["confidence"] != "confirmed":
                refreshed["authority"] = authority
                refreshed["confidence"] = "confirmed"
            self.active[key] = refreshed
            return
        if not confirmed and current is not None and current["confidence"] == "confirmed":
            # A model inference never overrides a confirmed fact: it becomes a question.
            self.questions.append(
                {
                    "text": (
                        f"model inferred {key} = {_json(value)}, but the confirmed value is "
                        f"{_json(current['value'])}"
                    ),
                    "key": key,
                    "value": value,
                    "authority": authority,
                    "conflicts_with": list(current["source_event_ids"]),
                    "source_event_ids": [seq],
                }
            )
            return
        entry = {
            "key": key,
            "value": value,
            "authority": authority,
            "confidence": "confirmed" if confirmed else "inferred",
            "observed_at": observed_at,
            "previous_value": None,
            "status": "active",
            "kind": kind,
            "source_event_ids": [seq],
        }
        if current is not None:
            entry["previous_value"] = current["value"]
            old = dict(current)
            old["status"] = "superseded"
            old["superseded_by"] = seq
            self.superseded.append(old)
        self.active[key] = entry

    def cites_correction(self, entry: Mapping[str, Any]) -> bool:
        return any(s in self.corrections for s in entry.get("source_event_ids") or ())

    def entries(self) -> tuple[list[dict[str, Any]], int]:
        """Active facts and the last MAX_SUPERSEDED_FACTS superseded ones (never one citing
        a correction of this fold)."""
        kept, dropped = _last_n(
            sorted(self.superseded, key=_fact_order), MAX_SUPERSEDED_FACTS, self.cites_correction
        )
        return sorted([*kept, *self.active.values()], key=_fact_order), dropped


def _fact_order(entry: Mapping[str, Any]) -> tuple[int, str, str]:
    sources = entry.get("source_event_ids") or [0]
    return (sources[0], str(entry.get("key")), str(entry.get("status")))


# --- the fold ----------------------------------------------------------------------------------


def _task_status(
    *, pending: list[dict[str, Any]], tool_state: list[dict[str, Any]], last_activity: str | None
) -> str:
    if any(p["kind"] == "approval" for p in pending):
        return "waiting_for_approval"
    if any(t["status"] == "unknown" and t.get("side_effect") for t in tool_state):
        return "unknown"
    if any(t["status"] == "running" for t in tool_state):
        return "running"
    if last_activity == "assistant":
        return "waiting_for_user"
    if last_activity is None:
        return "planned"
    return "running"


def fold_structured(
    *,
    previous: Mapping[str, Any] | None,
    events: Sequence[Mapping[str, Any]],
    covered_from: int,
    covered_until: int,
) -> dict[str, Any]:
    """Fold `events` (seq in (previous covered_until, covered_until]) onto `previous`.

    Returns summary content, schema_version 1 (CONTRACT "Summaries"), whose `covered` is
    {"from_seq": previous from_seq (or covered_from), "to_seq": covered_until}. Pure and
    deterministic; see the module docstring for the caps that keep it bounded.
    """
    prev = previous or {}
    counts: dict[str, int] = {
        k: int(v) for k, v in (prev.get("counts") or {}).items() if isinstance(v, int)
    }
    tools = {
        int(e["call_seq"]): e
        for e in _copy_entries(prev, "tool_state")
        if isinstance(e.get("call_seq"), int)
    }
    questions = _copy_entries(prev, "open_questions")
    facts = _Facts(prev, questions)
    requests = _copy_entries(prev, "requests")
    constraints = _copy_entries(prev, "constraints")
    completed = _copy_entries(prev, "completed_actions")
    decisions = _copy_entries(prev, "decisions")
    replies = _copy_entries(prev, "last_replies")
    approvals = _previous_approvals(prev)
    task = dict(prev.get("task") or {})
    goal_sources = list(task.get("source_event_ids") or [])
    goal: str | None = task.get("goal") or None
    goal_from_annotation = bool(task.get("goal_from_annotation"))
    last_activity: str | None = task.get("last_activity")
    unit_seq = int(task.get("unit_seq") or 0)  # the user message that opened the current unit

    for event in events:
        seq = event["seq"]
        kind = event["kind"]
        counts["events_folded"] = counts.get("events_folded", 0) + 1
        if kind == "message":
            role = event.get("role")
            text = content_text(event.get("content"))
            if role == "user":
                capped, truncated = _cap(text, MAX_REQUEST_CHARS)
                requests.append(
                    {
                        "text": capped,
                        "truncated": truncated,
                        "seq": seq,
                        "source_event_ids": [seq],
                    }
                )
                unit_seq = seq
                if goal is None:
                    goal = _cap(text, MAX_GOAL_CHARS)[0]
                    goal_sources = [seq]
                last_activity = "user"
            elif role == "assistant":
                capped, truncated = _cap(text, MAX_REPLY_CHARS)
                reply = {
                    "text": capped,
                    "truncated": truncated,
                    "unit_seq": unit_seq,
                    "source_event_ids": [seq],
                }
                # Assistant prose is dropped except the last reply of each unit.
                if replies and replies[-1].get("unit_seq") == unit_seq:
                    replies[-1] = reply
                else:
                    replies.append(reply)
                last_activity = "assistant"
        elif kind == "tool_call":
            _apply_tool_event(tools, event)
            last_activity = "tool"
        elif kind in ("tool_result", "side_effect_resolution"):
            succeeded = _apply_tool_event(tools, event)
            if succeeded is not None:
                completed.append(
                    {
                        "tool_call_id": succeeded["tool_call_id"],
                        "action": succeeded.get("action") or succeeded["tool"],
                        "source_event_ids": list(succeeded["source_event_ids"]),
                    }
                )
            if kind == "tool_result":
                for fact in event.get("verified_facts") or []:
                    facts.observe(
                        key=fact["key"],
                        value=fact.get("value"),
                        authority="tool",
                        seq=seq,
                        observed_at=event.get("created_at", ""),
                        kind="verified_fact",
                    )
            last_activity = "tool"
        elif kind == "annotation":
            _fold_annotation(
                event,
                facts=facts,
                constraints=constraints,
                decisions=decisions,
                questions=questions,
            )
            if event.get("type") == "goal":
                goal = _cap(str((event.get("payload") or {}).get("text", "")), MAX_GOAL_CHARS)[0]
                goal_sources = [seq]
                goal_from_annotation = True
        elif kind == "approval_request":
            approvals[seq] = _approval_entry(event)
        elif kind == "approval_decision":
            approval_seq = event.get("approval_seq")
            request = approvals.pop(approval_seq, None) if isinstance(approval_seq, int) else None
            action = request["action"] if request else ""
            reason = event.get("reason") or ""
            decisions.append(
                {
                    "text": f"approval #{approval_seq} {action} {event.get('decision', '')}: "
                    f"{reason}".replace("  ", " ").strip(),
                    "authority": "operator",
                    "approval_seq": approval_seq,
                    "decision": event.get("decision"),
                    "source_event_ids": _sources(
                        [approval_seq] if isinstance(approval_seq, int) else [], [seq]
                    ),
                }
            )

    tool_state, tools_dropped = _cap_tool_state(tools, _fresh_from(events))
    fact_entries, facts_dropped = facts.entries()
    requests, requests_dropped = _last_n(requests, MAX_REQUESTS)
    completed, completed_dropped = _last_n(completed, MAX_COMPLETED_ACTIONS)
    decisions, decisions_dropped = _last_n(decisions, MAX_DECISIONS)
    questions, questions_dropped = _last_n(questions, MAX_OPEN_QUESTIONS, facts.cites_correction)
    replies, replies_dropped = _last_n(replies, MAX_LAST_REPLIES)
    for name, dropped in (
        ("tool_state_dropped", tools_dropped),
        ("facts_dropped", facts_dropped),
        ("requests_dropped", requests_dropped),
        ("completed_actions_dropped", completed_dropped),
        ("decisions_dropped", decisions_dropped),
        ("open_questions_dropped", questions_dropped),
        ("last_replies_dropped", replies_dropped),
    ):
        if dropped:
            counts[name] = counts.get(name, 0) + dropped

    pending = pending_entries(approvals=approvals, tool_state=tool_state, questions=questions)
    status = _task_status(pending=pending, tool_state=tool_state, last_activity=last_activity)
    covered_start = (prev.get("covered") or {}).get("from_seq", covered_from)
    return {
        "schema_version": SCHEMA_VERSION,
        "covered": {"from_seq": covered_start, "to_seq": covered_until},
        "task": {
            "goal": goal or "",
            "status": status,
            "goal_from_annotation": goal_from_annotation,
            "last_activity": last_activity,
            "unit_seq": unit_seq,
            "source_event_ids": goal_sources,
        },
        "requests": requests,
        "constraints": constraints,
        "facts": fact_entries,
        "tool_state": tool_state,
        "completed_actions": completed,
        "pending": pending,
        "decisions": decisions,
        "open_questions": questions,
        "last_replies": replies,
        "counts": dict(sorted(counts.items())),
    }


def _fold_annotation(
    event: Mapping[str, Any],
    *,
    facts: _Facts,
    constraints: list[dict[str, Any]],
    decisions: list[dict[str, Any]],
    questions: list[dict[str, Any]],
) -> None:
    seq = event["seq"]
    kind = event.get("type")
    authority = event.get("authority", "model")
    payload = event.get("payload") or {}
    refers_to = [s for s in event.get("refers_to") or [] if isinstance(s, int)]
    if kind in ("fact", "correction"):
        facts.observe(
            key=str(payload.get("key")),
            value=payload.get("value"),
            authority=authority,
            seq=seq,
            observed_at=event.get("created_at", ""),
            kind=kind,
        )
    elif kind == "constraint":
        if payload.get("expires") or payload.get("status") == "expired":
            # An annotation may retire earlier constraints it refers to.
            for index, constraint in enumerate(constraints):
                if set(constraint["source_event_ids"]) & set(refers_to):
                    constraints[index] = {
                        **constraint,
                        "status": "expired",
                        "source_event_ids": _sources(constraint["source_event_ids"], [seq]),
                    }
            return
        constraints.append(
            {
                "text": str(payload.get("text", "")),
                "status": "active",
                "authority": authority,
                "source_event_ids": [seq],
            }
        )
    elif kind == "decision":
        decisions.append(
            {
                "text": str(payload.get("text", "")),
                "authority": authority,
                "source_event_ids": [seq],
            }
        )
    elif kind == "question":
        questions.append(
            {
                "text": str(payload.get("text", "")),
                "authority": authority,
                "source_event_ids": [seq],
            }
        )
    if kind in ("fact", "correction", "decision") and refers_to:
        # An answer that refers to a question closes it. A conflict the fold raised itself
        # (it has a "key") stays: it cites a guess that verification wants cited.
        questions[:] = [
            q
            for q in questions
            if "key" in q or not set(q.get("source_event_ids", [])) & set(refers_to)
        ]


def _approval_entry(event: Mapping[str, Any]) -> dict[str, Any]:
    seq = event["seq"]
    return {
        "kind": "approval",
        "ref": f"approval #{seq}: {event.get('action', '')}",
        "blocking": True,
        "approval_seq": seq,
        "action": event.get("action", ""),
        "source_event_ids": [seq],
    }


def _previous_approvals(previous: Mapping[str, Any] | None) -> dict[int, dict[str, Any]]:
    return {
        int(p["approval_seq"]): p
        for p in _copy_entries(previous, "pending")
        if p.get("kind") == "approval" and isinstance(p.get("approval_seq"), int)
    }


def pending_from_log(
    *, previous: Mapping[str, Any] | None, events: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The `pending` entries the log determines (approvals not yet decided, tool calls with no
    result, side effects with an unknown outcome), without questions: what the llm backend
    may not leave out or invent."""
    approvals = _previous_approvals(previous)
    for event in events:
        if event["kind"] == "approval_request":
            approvals[event["seq"]] = _approval_entry(event)
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
