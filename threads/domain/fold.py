"""The structured fold (docs/pipeline.md, "Fold with a summariser backend"): previous summary
content + events → new content.

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

Retractions and resets (threads.domain.markers): a retracted item (with the other side of its
call) is never folded as content, and a reset starts the content — requests, constraints,
facts, decisions, completed actions, open questions, last replies, the goal — afresh. Tool
state and pending approvals and side effects are facts about the world: they come from every
call, result, resolution, request and decision, retracted or not, before a reset or after.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from threads.domain.entries import cap_text, copy_entries, json_text, last_n, merge_sources
from threads.domain.ledger import (
    MAX_FINAL_TOOL_STATE as MAX_FINAL_TOOL_STATE,
)
from threads.domain.ledger import (
    RESOLVED,
    apply_tool_event,
    approval_entry,
    cap_tool_state,
    fresh_from,
    pending_entries,
    previous_approvals,
    task_status,
)
from threads.domain.markers import RESET, retracted_items
from threads.domain.render import content_text

SCHEMA_VERSION = 1
MAX_REQUESTS = 50
MAX_REQUEST_CHARS = 2000
MAX_REPLY_CHARS = 1000
MAX_GOAL_CHARS = 500
MAX_COMPLETED_ACTIONS = 50
MAX_SUPERSEDED_FACTS = 50
MAX_DECISIONS = 50
MAX_OPEN_QUESTIONS = 50
MAX_LAST_REPLIES = 10

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
# How the rendered summary and the dashboard name each section.
SECTION_TITLES = {
    "requests": "Requests",
    "constraints": "Constraints",
    "facts": "Facts",
    "tool_state": "Tool state",
    "completed_actions": "Completed actions",
    "pending": "Pending",
    "decisions": "Decisions",
    "open_questions": "Open questions",
    "last_replies": "Last replies",
}


# --- facts -------------------------------------------------------------------------------------


class _Facts:
    """Active facts by key + superseded ones, with the rules of docs/pipeline.md,
    "Fold with a summariser backend"."""

    def __init__(self, previous: Mapping[str, Any] | None, questions: list[dict[str, Any]]) -> None:
        self.active: dict[str, dict[str, Any]] = {}
        self.superseded: list[dict[str, Any]] = []
        for entry in copy_entries(previous, "facts"):
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
        if current is not None and json_text(current["value"]) == json_text(value):
            # Re-observation of the same value: cite it and refresh; a confirmation upgrades
            # a guess, a guess never downgrades a confirmation.
            refreshed = dict(current)
            refreshed["source_event_ids"] = merge_sources(
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
                        f"model inferred {key} = {json_text(value)}, but the confirmed value is "
                        f"{json_text(current['value'])}"
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

    def clear(self) -> None:
        """Forget every fact (a reset); the questions list is cleared by its owner."""
        self.active.clear()
        self.superseded.clear()
        self.corrections.clear()

    def cites_correction(self, entry: Mapping[str, Any]) -> bool:
        return any(s in self.corrections for s in entry.get("source_event_ids") or ())

    def entries(self) -> tuple[list[dict[str, Any]], int]:
        """Active facts and the last MAX_SUPERSEDED_FACTS superseded ones (never one citing
        a correction of this fold)."""
        kept, dropped = last_n(
            sorted(self.superseded, key=_fact_order), MAX_SUPERSEDED_FACTS, self.cites_correction
        )
        return sorted([*kept, *self.active.values()], key=_fact_order), dropped


def _fact_order(entry: Mapping[str, Any]) -> tuple[int, str, str]:
    sources = entry.get("source_event_ids") or [0]
    return (sources[0], str(entry.get("key")), str(entry.get("status")))


# --- the fold ----------------------------------------------------------------------------------


def fold_structured(
    *,
    previous: Mapping[str, Any] | None,
    events: Sequence[Mapping[str, Any]],
    covered_from: int,
    covered_until: int,
) -> dict[str, Any]:
    """Fold `events` (seq in (previous covered_until, covered_until]) onto `previous`.

    Returns summary content, schema_version 1 (docs/api.md, "Summary content (schema_version 1)"),
    whose `covered` is {"from_seq": previous from_seq (or covered_from), "to_seq": covered_until}.
    Pure and deterministic; see the module docstring for the caps that keep it bounded.
    """
    prev = previous or {}
    counts: dict[str, int] = {
        k: int(v) for k, v in (prev.get("counts") or {}).items() if isinstance(v, int)
    }
    tools = {
        int(e["call_seq"]): e
        for e in copy_entries(prev, "tool_state")
        if isinstance(e.get("call_seq"), int)
    }
    questions = copy_entries(prev, "open_questions")
    facts = _Facts(prev, questions)
    requests = copy_entries(prev, "requests")
    constraints = copy_entries(prev, "constraints")
    completed = copy_entries(prev, "completed_actions")
    decisions = copy_entries(prev, "decisions")
    replies = copy_entries(prev, "last_replies")
    approvals = previous_approvals(prev)
    task = dict(prev.get("task") or {})
    goal_sources = list(task.get("source_event_ids") or [])
    goal: str | None = task.get("goal") or None
    goal_from_annotation = bool(task.get("goal_from_annotation"))
    last_activity: str | None = task.get("last_activity")
    unit_seq = int(task.get("unit_seq") or 0)  # the user message that opened the current unit
    retracted = retracted_items(events)

    for event in events:
        seq = event["seq"]
        kind = event["kind"]
        counts["events_folded"] = counts.get("events_folded", 0) + 1
        if kind == RESET:
            # The content starts afresh; tool state and pending approvals (the world) stay.
            for section in (requests, constraints, completed, decisions, replies, questions):
                section.clear()
            facts.clear()
            goal, goal_sources, goal_from_annotation = None, [], False
            continue
        if seq in retracted:
            if kind in ("tool_call", "tool_result", "side_effect_resolution"):
                apply_tool_event(tools, event)  # what the tool did is not retracted
            elif kind == "approval_request":
                approvals[seq] = approval_entry(event)  # nor is the approval queue
            continue
        if kind == "message":
            role = event.get("role")
            text = content_text(event.get("content"))
            if role == "user":
                capped, truncated = cap_text(text, MAX_REQUEST_CHARS)
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
                    goal = cap_text(text, MAX_GOAL_CHARS)[0]
                    goal_sources = [seq]
                last_activity = "user"
            elif role == "assistant":
                capped, truncated = cap_text(text, MAX_REPLY_CHARS)
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
            apply_tool_event(tools, event)
            last_activity = "tool"
        elif kind in ("tool_result", "side_effect_resolution"):
            succeeded = apply_tool_event(tools, event)
            if succeeded is not None:
                completed.append(
                    {
                        "tool_call_id": succeeded["tool_call_id"],
                        "action": succeeded.get("action") or succeeded["tool"],
                        "source_event_ids": list(succeeded["source_event_ids"]),
                    }
                )
            if kind == "side_effect_resolution":
                # A person settled a call the agent left open: the agent is not at work on
                # it (its run ended, or the call would not have waited for a person), so the
                # task status follows the ledger, not a "tool" activity the agent never had.
                last_activity = RESOLVED
                continue
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
                goal = cap_text(str((event.get("payload") or {}).get("text", "")), MAX_GOAL_CHARS)[
                    0
                ]
                goal_sources = [seq]
                goal_from_annotation = True
        elif kind == "approval_request":
            approvals[seq] = approval_entry(event)
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
                    "source_event_ids": merge_sources(
                        [approval_seq] if isinstance(approval_seq, int) else [], [seq]
                    ),
                }
            )

    tool_state, tools_dropped = cap_tool_state(tools, fresh_from(events))
    fact_entries, facts_dropped = facts.entries()
    requests, requests_dropped = last_n(requests, MAX_REQUESTS)
    completed, completed_dropped = last_n(completed, MAX_COMPLETED_ACTIONS)
    decisions, decisions_dropped = last_n(decisions, MAX_DECISIONS)
    questions, questions_dropped = last_n(questions, MAX_OPEN_QUESTIONS, facts.cites_correction)
    replies, replies_dropped = last_n(replies, MAX_LAST_REPLIES)
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
    status = task_status(pending=pending, tool_state=tool_state, last_activity=last_activity)
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


def world_state(previous: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What of a summary's content is about the world rather than the conversation: its tool
    state and pending approvals (and where it starts). A fold that rebuilds the content from a
    reset starts from this, so that side effects and approvals made before the reset are not
    forgotten (docs/pipeline.md, "Fold with a summariser backend")."""
    if previous is None:
        return None
    return {
        "schema_version": previous.get("schema_version", SCHEMA_VERSION),
        "covered": dict(previous.get("covered") or {}),
        "tool_state": copy_entries(previous, "tool_state"),
        "pending": [p for p in copy_entries(previous, "pending") if p.get("kind") == "approval"],
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
                        "source_event_ids": merge_sources(constraint["source_event_ids"], [seq]),
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
