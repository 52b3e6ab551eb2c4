"""Verification of a candidate summary before it may become head (docs/design.md §5.4).

Every check is code with a name; a failed check's detail names the offending entry or seq.
Checks never raise on malformed input: a broken shape fails `schema` and the other checks look
at whatever is well-formed, so one defect fails one check.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from threads.domain.events import AUTHORITIES
from threads.domain.fold import (
    CONFIRMED_AUTHORITIES,
    PENDING_KINDS,
    SCHEMA_VERSION,
    SECTIONS,
    TASK_STATUSES,
)
from threads.domain.ledger import TOOL_STATUSES, tool_state_from_log
from threads.domain.markers import last_reset, retracted_items

CHECK_NAMES = (
    "schema",
    "enums",
    "sources_exist",
    "sources_in_range",
    "side_effects_cited",
    "constraints_cited",
    "tool_status_matches_log",
    "no_model_override",
    "cursor_continuity",
    "chain_hash",
)
CONFIDENCES = ("confirmed", "inferred", "unknown")
FACT_STATUSES = ("active", "superseded")
CONSTRAINT_STATUSES = ("active", "expired")
LIST_SECTIONS = tuple(s for s in SECTIONS if s != "last_replies")
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
MAX_DETAIL_ITEMS = 5


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class Verification:
    ok: bool
    checks: list[Check] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
        }

    def failed(self) -> list[str]:
        return [c.name for c in self.checks if not c.ok]


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _entries(content: Mapping[str, Any], section: str) -> list[Mapping[str, Any]]:
    value = content.get(section)
    return [e for e in value if isinstance(e, Mapping)] if isinstance(value, list) else []


def _label(section: str, index: int, entry: Mapping[str, Any]) -> str:
    for name in ("key", "tool_call_id", "ref", "text"):
        value = entry.get(name)
        if isinstance(value, str) and value:
            return f"{section}[{index}] ({name}={value[:40]!r})"
    return f"{section}[{index}]"


class _Cite:
    """One citation; its label is built only when a problem is reported."""

    __slots__ = ("section", "index", "entry", "seq")

    def __init__(self, section: str, index: int, entry: Mapping[str, Any], seq: Any) -> None:
        self.section, self.index, self.entry, self.seq = section, index, entry, seq

    @property
    def label(self) -> str:
        return "task" if self.section == "task" else _label(self.section, self.index, self.entry)


def _cited(content: Mapping[str, Any]) -> Iterator[_Cite]:
    """Every citation in the content."""
    task = content.get("task")
    if isinstance(task, Mapping) and isinstance(task.get("source_event_ids"), list):
        for seq in task["source_event_ids"]:
            yield _Cite("task", 0, task, seq)
    for section in (*LIST_SECTIONS, "last_replies"):
        for index, entry in enumerate(_entries(content, section)):
            sources = entry.get("source_event_ids")
            if isinstance(sources, list):
                for seq in sources:
                    yield _Cite(section, index, entry, seq)


def _cited_seqs(content: Mapping[str, Any]) -> set[int]:
    seqs: set[int] = set()
    task = content.get("task")
    for entry in [task] if isinstance(task, Mapping) else []:
        seqs.update(s for s in entry.get("source_event_ids") or () if _is_int(s))
    for section in (*LIST_SECTIONS, "last_replies"):
        for entry in _entries(content, section):
            sources = entry.get("source_event_ids")
            if isinstance(sources, list):
                seqs.update(s for s in sources if _is_int(s))
    return seqs


def _summarise(problems: list[str]) -> str:
    if not problems:
        return ""
    more = len(problems) - MAX_DETAIL_ITEMS
    head = "; ".join(problems[:MAX_DETAIL_ITEMS])
    return head + (f"; and {more} more" if more > 0 else "")


def _result(name: str, problems: list[str], ok_detail: str) -> Check:
    return Check(name=name, ok=not problems, detail=_summarise(problems) or ok_detail)


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
    for index, entry in enumerate(_entries(candidate, "constraints")):
        expect(
            f"{_label('constraints', index, entry)}.status",
            entry.get("status"),
            CONSTRAINT_STATUSES,
        )
    for index, entry in enumerate(_entries(candidate, "facts")):
        label = _label("facts", index, entry)
        expect(f"{label}.authority", entry.get("authority"), AUTHORITIES)
        expect(f"{label}.confidence", entry.get("confidence"), CONFIDENCES)
        expect(f"{label}.status", entry.get("status"), FACT_STATUSES)
    for index, entry in enumerate(_entries(candidate, "tool_state")):
        expect(f"{_label('tool_state', index, entry)}.status", entry.get("status"), TOOL_STATUSES)
    for index, entry in enumerate(_entries(candidate, "pending")):
        expect(f"{_label('pending', index, entry)}.kind", entry.get("kind"), PENDING_KINDS)
    return _result("enums", problems, "every status, authority and kind is allowed")


def check_sources_exist(
    candidate: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
    event_seqs: set[int],
    base_covered_until: int,
    boundary: int,
) -> Check:
    """Every citation is a seq number naming an event: one of the folded events, or one the
    previous summary already cited (the log before the fold is not re-read here)."""
    known = _cited_seqs(previous) if previous else set()
    problems: list[str] = []
    for cite in _cited(candidate):
        seq = cite.seq
        if not _is_int(seq):
            problems.append(f"{cite.label} cites {seq!r}, which is not an event seq")
        elif base_covered_until < seq <= boundary and seq not in event_seqs:
            problems.append(f"{cite.label} cites #{seq}, which is not among the folded events")
        elif 0 < seq <= base_covered_until and previous is not None and seq not in known:
            # The folder saw only the previous summary and the new events: an older seq it
            # cites must come from the previous summary, or it was made up.
            problems.append(f"{cite.label} cites #{seq}, which the previous summary never cited")
    return _result("sources_exist", problems, "every cited seq names an event")


def check_sources_in_range(candidate: Mapping[str, Any], boundary: int) -> Check:
    problems = [
        f"{cite.label} cites #{cite.seq}, outside (0, {boundary}]"
        for cite in _cited(candidate)
        if _is_int(cite.seq) and not 0 < cite.seq <= boundary
    ]
    return _result("sources_in_range", problems, f"every citation lies in (0, {boundary}]")


def check_side_effects_cited(
    candidate: Mapping[str, Any], events: Sequence[Mapping[str, Any]]
) -> Check:
    """Retracted or before a reset, a side-effecting call is still cited: tool state reports
    what the tool did, whatever the agent sees (docs/design.md §5.4)."""
    cited = _cited_seqs(candidate)
    problems = [
        f"side-effecting call #{e['seq']} {e.get('tool_name')}#{e.get('tool_call_id')} "
        "is cited by no entry"
        for e in events
        if e["kind"] == "tool_call" and e.get("side_effect") and e["seq"] not in cited
    ]
    return _result("side_effects_cited", problems, "every side-effecting call is cited")


def check_constraints_cited(
    candidate: Mapping[str, Any], events: Sequence[Mapping[str, Any]]
) -> Check:
    """A constraint or correction that a retraction in the range took back, or that a reset
    in the range left behind, is no longer content: it need not be cited."""
    cited = _cited_seqs(candidate)
    retracted = retracted_items(events)
    reset_at = last_reset(events) or 0
    problems = [
        f"{e.get('type')} #{e['seq']} is cited by no entry"
        for e in events
        if e["kind"] == "annotation"
        and e.get("type") in ("constraint", "correction")
        and e["seq"] not in cited
        and e["seq"] not in retracted
        and e["seq"] > reset_at
    ]
    return _result("constraints_cited", problems, "every constraint and correction is cited")


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
    for index, entry in enumerate(_entries(candidate, "tool_state")):
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


def _confirmed_keys(
    previous: Mapping[str, Any] | None, events: Sequence[Mapping[str, Any]]
) -> dict[str, int]:
    """Keys with a confirmed observation → the seq of the latest one. A retracted observation,
    or one a reset in the range left behind (with the previous summary's facts), no longer
    holds: a model guess may stand after it, as the fold lets it."""
    keys: dict[str, int] = {}
    retracted = retracted_items(events)
    reset_at = last_reset(events)
    if reset_at is not None:
        previous = None
        events = [e for e in events if e["seq"] > reset_at]
    events = [e for e in events if e["seq"] not in retracted]
    for entry in _entries(previous or {}, "facts"):
        if entry.get("authority") in CONFIRMED_AUTHORITIES and isinstance(entry.get("key"), str):
            seqs = [s for s in entry.get("source_event_ids") or [] if _is_int(s)]
            keys[entry["key"]] = max([keys.get(entry["key"], 0), *seqs])
    for event in events:
        if (
            event["kind"] == "annotation"
            and event.get("type") in ("fact", "correction")
            and event.get("authority") in CONFIRMED_AUTHORITIES
        ):
            keys[str((event.get("payload") or {}).get("key"))] = event["seq"]
        elif event["kind"] == "tool_result":
            for fact in event.get("verified_facts") or []:
                keys[str(fact.get("key"))] = event["seq"]
    return keys


def check_no_model_override(
    candidate: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
    events: Sequence[Mapping[str, Any]],
) -> Check:
    confirmed = _confirmed_keys(previous, events)
    problems: list[str] = []
    active: dict[str, str] = {}
    for index, entry in enumerate(_entries(candidate, "facts")):
        label = _label("facts", index, entry)
        key = entry.get("key")
        if entry.get("authority") == "model" and entry.get("confidence") == "confirmed":
            problems.append(f"{label} is a model inference marked confirmed")
        if entry.get("status") != "active" or not isinstance(key, str):
            continue
        if key in active:
            problems.append(f"{label} is a second active fact for {key!r} (first: {active[key]})")
        active[key] = label
        if entry.get("authority") == "model" and key in confirmed:
            problems.append(
                f"{label} lets a model inference stand over the confirmed observation "
                f"#{confirmed[key]}"
            )
    return _result("no_model_override", problems, "no model inference overrides a confirmed fact")


def check_cursor_continuity(
    candidate: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
    events: Sequence[Mapping[str, Any]],
    base_covered_until: int,
    boundary: int,
) -> Check:
    problems: list[str] = []
    covered = candidate.get("covered")
    covered = covered if isinstance(covered, Mapping) else {}
    if boundary < base_covered_until:
        problems.append(
            f"boundary {boundary} is before the head's covered_until {base_covered_until}"
        )
    if covered.get("to_seq") != boundary:
        problems.append(f"covered.to_seq is {covered.get('to_seq')!r}, the boundary is {boundary}")
    prev_covered = (previous or {}).get("covered")
    expected_from = prev_covered.get("from_seq") if isinstance(prev_covered, Mapping) else None
    if expected_from is not None and covered.get("from_seq") != expected_from:
        problems.append(
            f"covered.from_seq is {covered.get('from_seq')!r}; the previous summary starts at "
            f"{expected_from}"
        )
    seqs = [e["seq"] for e in events]
    if seqs != list(range(base_covered_until + 1, boundary + 1)):
        gaps = sorted(set(range(base_covered_until + 1, boundary + 1)) - set(seqs))
        problems.append(
            f"the folded events are not exactly #{base_covered_until + 1}..#{boundary}"
            + (f" (missing #{gaps[0]})" if gaps else "")
        )
    return _result(
        "cursor_continuity", problems, f"continues from {base_covered_until} to {boundary}"
    )


def _short(value: str) -> str:
    """A digest shortened for reading; anything else (a caller's explanation) in full."""
    if len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12] + "…"
    return repr(value)


def check_chain_hash(
    events: Sequence[Mapping[str, Any]], chain_hash_at_boundary: str, expected_chain_hash: str
) -> Check:
    problems: list[str] = []
    if not hmac.compare_digest(str(chain_hash_at_boundary), str(expected_chain_hash)):
        problems.append(
            f"chain hash at the boundary {_short(chain_hash_at_boundary)} differs from the "
            f"expected {_short(expected_chain_hash)}"
        )
    if (
        events
        and events[-1].get("hash") is not None
        and not hmac.compare_digest(str(events[-1]["hash"]), str(chain_hash_at_boundary))
    ):
        problems.append(f"event #{events[-1]['seq']} carries another hash than the boundary's")
    return _result("chain_hash", problems, "chain hash at the boundary matches")


def verify_candidate(
    *,
    candidate: dict[str, Any],
    previous: dict[str, Any] | None,
    events: list[dict[str, Any]],
    base_covered_until: int,
    boundary: int,
    chain_hash_at_boundary: str,
    expected_chain_hash: str,
) -> Verification:
    """Run every named check (CHECK_NAMES, in that order) on a candidate summary.

    `events` are the stored events in (base_covered_until, boundary]; `previous` is the head's
    content the candidate was folded on (None for a first fold).
    """
    schema = check_schema(candidate)
    if not isinstance(candidate, Mapping):
        checks = [schema] + [
            Check(n, False, "the candidate is not a JSON object") for n in CHECK_NAMES[1:]
        ]
        return Verification(ok=False, checks=checks)
    seqs = {e["seq"] for e in events}
    checks = [
        schema,
        check_enums(candidate),
        check_sources_exist(candidate, previous, seqs, base_covered_until, boundary),
        check_sources_in_range(candidate, boundary),
        check_side_effects_cited(candidate, events),
        check_constraints_cited(candidate, events),
        check_tool_status(candidate, previous, events),
        check_no_model_override(candidate, previous, events),
        check_cursor_continuity(candidate, previous, events, base_covered_until, boundary),
        check_chain_hash(events, chain_hash_at_boundary, expected_chain_hash),
    ]
    return Verification(ok=all(c.ok for c in checks), checks=checks)
