"""The shape checks of a candidate summary (threads.domain.verify): `schema`, every section,
entry and field of the schema version is there with its type; `enums`, every status,
authority, confidence and kind is an allowed one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from threads.domain.entries import section_entries
from threads.domain.events import AUTHORITIES
from threads.domain.fold import PENDING_KINDS, SCHEMA_VERSION, TASK_STATUSES
from threads.domain.ledger import TOOL_STATUSES
from threads.domain.verify_report import Check, _is_int, _label, _result

CONFIDENCES = ("confirmed", "inferred", "unknown")
FACT_STATUSES = ("active", "superseded")
CONSTRAINT_STATUSES = ("active", "expired")
# section -> fields each entry must have (besides source_event_ids)
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "requests": ("text",),
    "constraints": ("text", "status"),
    "facts": ("key", "value", "authority", "confidence", "status"),
    "tool_state": ("tool_call_id", "tool", "side_effect", "status"),
    "completed_actions": ("tool_call_id", "action"),
    "pending": ("kind", "ref", "blocking"),
    "decisions": (),
    "open_questions": (),
}


# --- checks ------------------------------------------------------------------------------------


def check_schema(candidate: Any) -> Check:
    problems: list[str] = []
    if not isinstance(candidate, Mapping):
        return Check("schema", False, "the candidate is not a JSON object")
    if candidate.get("schema_version") != SCHEMA_VERSION:
        problems.append(
            f"schema_version is {candidate.get('schema_version')!r}, expected {SCHEMA_VERSION}"
        )
    covered = candidate.get("covered")
    if not isinstance(covered, Mapping) or not all(
        _is_int(covered.get(k)) for k in ("from_seq", "to_seq")
    ):
        problems.append("covered must be {from_seq: int, to_seq: int}")
    task = candidate.get("task")
    if not isinstance(task, Mapping):
        problems.append("task must be an object")
    else:
        if not isinstance(task.get("goal"), str):
            problems.append("task.goal must be a string")
        if not isinstance(task.get("source_event_ids"), list):
            problems.append("task.source_event_ids must be a list")
    for section, required in REQUIRED_FIELDS.items():
        value = candidate.get(section)
        if not isinstance(value, list):
            problems.append(f"{section} must be a list")
            continue
        for index, entry in enumerate(value):
            if not isinstance(entry, Mapping):
                problems.append(f"{section}[{index}] is not an object")
                continue
            missing = [f for f in (*required, "source_event_ids") if f not in entry]
            if missing:
                problems.append(f"{_label(section, index, entry)} lacks {', '.join(missing)}")
            elif not isinstance(entry["source_event_ids"], list):
                problems.append(f"{_label(section, index, entry)} source_event_ids is not a list")
    if "narrative" in candidate and not isinstance(candidate["narrative"], str | None):
        problems.append("narrative must be a string")
    return _result("schema", problems, "shape matches schema_version 1")


def check_enums(candidate: Mapping[str, Any]) -> Check:
    problems: list[str] = []

    def expect(label: str, value: Any, allowed: tuple[str, ...]) -> None:
        if value not in allowed:
            problems.append(f"{label} is {value!r}, not one of {'|'.join(allowed)}")

    task = candidate.get("task")
    if isinstance(task, Mapping) and "status" in task:
        expect("task.status", task.get("status"), TASK_STATUSES)
    for index, entry in enumerate(section_entries(candidate, "constraints")):
        expect(
            f"{_label('constraints', index, entry)}.status",
            entry.get("status"),
            CONSTRAINT_STATUSES,
        )
    for index, entry in enumerate(section_entries(candidate, "facts")):
        label = _label("facts", index, entry)
        expect(f"{label}.authority", entry.get("authority"), AUTHORITIES)
        expect(f"{label}.confidence", entry.get("confidence"), CONFIDENCES)
        expect(f"{label}.status", entry.get("status"), FACT_STATUSES)
    for index, entry in enumerate(section_entries(candidate, "tool_state")):
        expect(f"{_label('tool_state', index, entry)}.status", entry.get("status"), TOOL_STATUSES)
    for index, entry in enumerate(section_entries(candidate, "pending")):
        expect(f"{_label('pending', index, entry)}.kind", entry.get("kind"), PENDING_KINDS)
    return _result("enums", problems, "every status, authority and kind is allowed")
