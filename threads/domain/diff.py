"""Comparing summaries with each other and with the events they came from (docs/dashboard.md,
"Dashboard").

Entries of a section are matched by an identity that survives a re-fold (a fact by key and first
source, a tool call by its call seq, ...); same identity with other content is "changed".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from threads.domain.canonical import canonical_json
from threads.domain.entries import section_entries
from threads.domain.fold import SECTIONS

TASK_FIELDS = ("goal", "status")


def _first_source(entry: Mapping[str, Any]) -> Any:
    sources = entry.get("source_event_ids") or []
    return sources[0] if isinstance(sources, list) and sources else None


def _identity(section: str, entry: Mapping[str, Any]) -> str:
    parts: tuple[Any, ...]
    if section == "facts":
        parts = (entry.get("key"), _first_source(entry))
    elif section == "tool_state":
        parts = (entry.get("call_seq") or entry.get("tool_call_id"),)
    elif section == "completed_actions":
        parts = (entry.get("tool_call_id"), _first_source(entry))
    elif section == "pending":
        parts = (entry.get("kind"), entry.get("ref"), _first_source(entry))
    elif section == "constraints":
        parts = (entry.get("text"), _first_source(entry))
    else:
        parts = (_first_source(entry), entry.get("text"))
    return json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str)


def label(section: str, entry: Mapping[str, Any]) -> str:
    """A short human name for an entry, as the dashboard lists it."""
    if section == "facts":
        return f"fact {entry.get('key')}"
    if section == "tool_state":
        return f"tool {entry.get('tool')}#{entry.get('tool_call_id')}"
    if section == "completed_actions":
        return f"action {entry.get('tool_call_id')}"
    if section == "pending":
        return f"pending {entry.get('kind')} {str(entry.get('ref', ''))[:60]}"
    singular = {
        "requests": "request",
        "constraints": "constraint",
        "decisions": "decision",
        "open_questions": "question",
        "last_replies": "reply",
    }.get(section, section)
    return f"{singular} {str(entry.get('text', ''))[:60]}".rstrip()


def _changed_fields(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    return {
        name: {"old": old.get(name), "new": new.get(name)}
        for name in sorted(set(old) | set(new))
        if canonical_json(old.get(name)) != canonical_json(new.get(name))
    }


def diff_versions(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """What changed between two summary contents.

    Returns {"covered": {"old", "new"}, "task": {field: {"old","new"}}, "sections": {section:
    {"added": [entry], "removed": [entry], "changed": [{"label", "old", "new", "fields"}]}},
    "counts": {"added", "removed", "changed"}}. Sections with no difference are left out.
    """
    sections: dict[str, dict[str, list[Any]]] = {}
    totals = {"added": 0, "removed": 0, "changed": 0}
    for section in SECTIONS:
        before = {_identity(section, e): e for e in section_entries(old, section)}
        after = {_identity(section, e): e for e in section_entries(new, section)}
        added = [dict(after[k]) for k in after if k not in before]
        removed = [dict(before[k]) for k in before if k not in after]
        changed = [
            {
                "label": label(section, after[k]),
                "old": dict(before[k]),
                "new": dict(after[k]),
                "fields": _changed_fields(before[k], after[k]),
            }
            for k in after
            if k in before and canonical_json(before[k]) != canonical_json(after[k])
        ]
        if added or removed or changed:
            sections[section] = {"added": added, "removed": removed, "changed": changed}
            totals["added"] += len(added)
            totals["removed"] += len(removed)
            totals["changed"] += len(changed)
    old_task = old.get("task") if isinstance(old.get("task"), Mapping) else {}
    new_task = new.get("task") if isinstance(new.get("task"), Mapping) else {}
    task = {
        name: {"old": (old_task or {}).get(name), "new": (new_task or {}).get(name)}
        for name in TASK_FIELDS
        if (old_task or {}).get(name) != (new_task or {}).get(name)
    }
    return {
        "covered": {"old": old.get("covered"), "new": new.get("covered")},
        "task": task,
        "sections": sections,
        "counts": totals,
    }


def citations(content: Mapping[str, Any]) -> dict[int, list[str]]:
    """seq → labels of the entries citing it, for the fact-by-fact view against the events."""
    cited: dict[int, list[str]] = {}

    def add(seq: Any, name: str) -> None:
        if isinstance(seq, int) and not isinstance(seq, bool):
            names = cited.setdefault(seq, [])
            if name not in names:
                names.append(name)

    task = content.get("task")
    if isinstance(task, Mapping):
        for seq in task.get("source_event_ids") or []:
            add(seq, "task goal")
    for section in SECTIONS:
        for entry in section_entries(content, section):
            for seq in entry.get("source_event_ids") or []:
                add(seq, label(section, entry))
    return dict(sorted(cited.items()))


_IMPORTANT: tuple[tuple[str, Callable[[Mapping[str, Any]], bool]], ...] = (
    ("side-effecting tool call", lambda e: e["kind"] == "tool_call" and bool(e.get("side_effect"))),
    ("constraint", lambda e: e["kind"] == "annotation" and e.get("type") == "constraint"),
    ("correction", lambda e: e["kind"] == "annotation" and e.get("type") == "correction"),
)


def uncited_important(
    content: Mapping[str, Any], events: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Side-effecting calls, constraints and corrections inside the summary's covered range
    that no entry cites: what a reviewer should look at first."""
    covered = content.get("covered") if isinstance(content.get("covered"), Mapping) else {}
    start = (covered or {}).get("from_seq", 1)
    end = (covered or {}).get("to_seq", 0)
    cited = citations(content)
    out: list[dict[str, Any]] = []
    for event in events:
        seq = event["seq"]
        if not start <= seq <= end or seq in cited:
            continue
        for why, test in _IMPORTANT:
            if test(event):
                out.append({"seq": seq, "kind": event["kind"], "reason": f"uncited {why}"})
                break
    return out
