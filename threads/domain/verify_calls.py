"""The checks of what a candidate says of the calls (threads.domain.verify): its tool state
reports the status the log gives each call (`tool_status_matches_log`), the task's status
agrees with the ledger (`task_status_matches_ledger`), and a completed action is a call that
succeeded, cited by its result (`completed_actions_match_ledger`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from threads.domain.claims import contains_words, event_text, normalise
from threads.domain.entries import json_text, section_entries
from threads.domain.ledger import call_status_after, tool_state_from_log
from threads.domain.verify_ledger import Ledger, _call_label, _carried, _sources
from threads.domain.verify_report import Check, _is_int, _label, _result


def check_tool_status(
    candidate: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
    events: Sequence[Mapping[str, Any]],
) -> Check:
    """Each tool_state entry reports the status the log gives its call. Omitted calls are
    the citation checks' business."""
    expected = tool_state_from_log(previous=previous, events=list(events))
    by_call: dict[int, Mapping[str, Any]] = {e["call_seq"]: e for e in expected}
    by_id: dict[str, list[Mapping[str, Any]]] = {}
    for known in expected:
        by_id.setdefault(str(known["tool_call_id"]), []).append(known)
    problems: list[str] = []
    for index, entry in enumerate(section_entries(candidate, "tool_state")):
        call_seq = entry.get("call_seq")
        truth: Mapping[str, Any] | None
        if _is_int(call_seq):
            truth = by_call.get(call_seq)
        else:
            # A candidate that does not name the call's seq is matched by id, latest call wins.
            matches = by_id.get(str(entry.get("tool_call_id")), [])
            truth = matches[-1] if matches else None
        if truth is None:
            problems.append(f"{_label('tool_state', index, entry)} names a call the log lacks")
        elif entry.get("status") != truth["status"]:
            problems.append(
                f"{_label('tool_state', index, entry)} says {entry.get('status')!r}; "
                f"the log says {truth['status']!r} (call #{truth['call_seq']})"
            )
    return _result("tool_status_matches_log", problems, "tool state agrees with the log")


def check_task_status_matches_ledger(candidate: Mapping[str, Any], ledger: Ledger) -> Check:
    """A task is `succeeded` only when nothing blocking is open (an approval, a call with no
    result, a side effect whose outcome is unknown) and its last side effect succeeded; it is
    `failed` only when something failed or nothing is open, and not when every call it made
    succeeded."""
    problems: list[str] = []
    task = candidate.get("task")
    status = task.get("status") if isinstance(task, Mapping) else None
    side = [c for c in ledger.calls if c.side_effect]
    if status == "succeeded":
        for item in ledger.pending:
            if item.get("blocking"):
                problems.append(f"task.status is 'succeeded' while {item['ref']} is pending")
        if side and side[-1].status in ("failed", "cancelled"):
            problems.append(
                f"task.status is 'succeeded' but the last side effect is {_call_label(side[-1])}"
            )
    elif status == "failed":
        failed = [c for c in ledger.calls if c.status in ("failed", "cancelled")]
        open_effects = [c for c in side if c.status in ("unknown", "running")]
        if open_effects and not failed:
            problems.append(
                "task.status is 'failed' while the outcome of "
                f"{', '.join(_call_label(c) for c in open_effects)} is not known"
            )
        elif side and not failed and all(c.status == "succeeded" for c in ledger.calls):
            problems.append(
                "task.status is 'failed' but every call succeeded "
                f"({', '.join(_call_label(c) for c in side)})"
            )
    return _result("task_status_matches_ledger", problems, "the task status agrees with the ledger")


def check_completed_actions_match_ledger(candidate: Mapping[str, Any], ledger: Ledger) -> Check:
    """A completed action names a call the ledger says succeeded, and cites that call's
    succeeding result or resolution (not the call alone, not a sibling call's events)."""
    problems: list[str] = []
    for index, entry in enumerate(section_entries(candidate, "completed_actions")):
        if _carried(ledger.previous, "completed_actions", entry):
            continue
        label = _label("completed_actions", index, entry)
        call_id = str(entry.get("tool_call_id"))
        visible = ledger.visible(entry)
        if not _sources(entry):
            problems.append(f"{label} cites nothing")
        cited_calls = {c.call_seq: c for e in visible if (c := ledger.call_of(e)) is not None}
        same_id = [c for c in ledger.calls if c.tool_call_id == call_id]
        siblings = [c for c in cited_calls.values() if c.tool_call_id != call_id]
        for other in siblings:
            problems.append(f"{label} cites events of another call, {_call_label(other)}")
        chosen = [c for c in same_id if c.call_seq in cited_calls] or same_id
        if not chosen:
            if not any(e.get("tool_call_id") == call_id for e in visible) and not any(
                str(a.get("tool_call_id")) == call_id
                for a in section_entries(ledger.previous or {}, "completed_actions")
            ):
                problems.append(f"{label} names a call the log lacks")
            continue
        if not any(c.status == "succeeded" for c in chosen):
            problems.append(
                f"{label} is a completed action, but the ledger has "
                f"{', '.join(_call_label(c) for c in chosen)}"
            )
            continue
        succeeding = [
            e
            for e in ledger.folded
            if e["kind"] in ("tool_result", "side_effect_resolution")
            and e.get("call_seq") in {c.call_seq for c in chosen}
            and call_status_after(e["kind"], e.get("status")) == "succeeded"
        ]
        if succeeding and not any(e in visible for e in succeeding):
            problems.append(
                f"{label} does not cite the result that succeeded (#{succeeding[-1]['seq']})"
            )
        own = [e for e in visible if ledger.call_of(e) in chosen]
        if not _action_held(str(entry.get("action") or ""), own):
            problems.append(f"{label} describes another action than the call it cites")
    return _result(
        "completed_actions_match_ledger",
        problems,
        "every completed action is a succeeded call, cited by its result",
    )


def _action_held(action: str, events: list[Mapping[str, Any]]) -> bool:
    """A completed action's words are its call's: the fold's own form (tool and arguments), or
    words the call and its result hold (every number). Unknown when the call is not cited."""
    calls = [e for e in events if e.get("kind") == "tool_call"]
    if not calls or not action:
        return True
    for call in calls:
        own = f"{call.get('tool_name')} {json_text(call.get('arguments', {}))}"
        if normalise(action) in normalise(own):
            return True
    return contains_words(action, " ".join(event_text(e) for e in events))
