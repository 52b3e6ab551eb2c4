"""Verification of a candidate summary before it may become head (docs/pipeline.md, "Verify").

Every check is code with a name; a failed check's detail names the offending entry or seq.
Checks never raise on malformed input: a broken shape fails `schema` and the other checks look
at whatever is well-formed, so one defect fails one check.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from threads.domain.claims import (
    APPROVED,
    FAILURE,
    REJECTED,
    SUCCESS,
    UNCERTAIN,
    CallRef,
    agrees,
    calls_named,
    claims,
    contains_words,
    event_text,
    is_negated,
    normalise,
)
from threads.domain.entries import json_text, section_entries
from threads.domain.events import AUTHORITIES
from threads.domain.fold import (
    CONFIRMED_AUTHORITIES,
    PENDING_KINDS,
    SCHEMA_VERSION,
    SECTIONS,
    TASK_STATUSES,
)
from threads.domain.ledger import (
    TOOL_STATUSES,
    call_status_after,
    pending_from_log,
    tool_state_from_log,
)
from threads.domain.markers import last_reset, retracted_items
from threads.domain.render import content_text

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
    "task_status_matches_ledger",
    "completed_actions_match_ledger",
    "facts_cite_support",
    "facts_current",
    "constraints_verbatim",
    "decisions_cite_support",
    "citations_fit_entries",
    "claims_match_ledger",
    "narrative_matches_ledger",
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
        for index, entry in enumerate(section_entries(content, section)):
            sources = entry.get("source_event_ids")
            if isinstance(sources, list):
                for seq in sources:
                    yield _Cite(section, index, entry, seq)


def _cited_seqs(content: Mapping[str, Any]) -> set[int]:
    seqs: set[int] = set()
    task = content.get("task")
    if isinstance(task, Mapping) and isinstance(task.get("source_event_ids"), list):
        seqs.update(s for s in task["source_event_ids"] if _is_int(s))
    for section in (*LIST_SECTIONS, "last_replies"):
        for entry in section_entries(content, section):
            sources = entry.get("source_event_ids")
            if isinstance(sources, list):
                seqs.update(s for s in sources if _is_int(s))
    return seqs


def cited_seqs(content: Any) -> set[int]:
    """Every seq the content cites (an empty set for what is not an object)."""
    return _cited_seqs(content) if isinstance(content, Mapping) else set()


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
    what the tool did, whatever the agent sees (docs/pipeline.md, "Verify")."""
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
    for entry in section_entries(previous or {}, "facts"):
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
    for index, entry in enumerate(section_entries(candidate, "facts")):
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
    cited_events: Mapping[int, Mapping[str, Any]] | None = None,
) -> Verification:
    """Run every named check (CHECK_NAMES, in that order) on a candidate summary.

    `events` are the stored events in (base_covered_until, boundary]; `previous` is the head's
    content the candidate was folded on (None for a first fold); `cited_events`, the events
    before the range that the candidate cites (by seq), which the claim checks read — a cited
    seq no one supplied is left to the other checks.
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
    ledger = build_ledger(previous, events, cited_events)
    checks += [
        check_task_status_matches_ledger(candidate, ledger),
        check_completed_actions_match_ledger(candidate, ledger),
        check_facts_cite_support(candidate, ledger),
        check_facts_current(candidate, previous, events),
        check_constraints_verbatim(candidate, ledger),
        check_decisions_cite_support(candidate, ledger),
        check_citations_fit_entries(candidate, ledger),
        check_claims_match_ledger(candidate, ledger),
        check_narrative_matches_ledger(candidate, ledger),
    ]
    return Verification(ok=all(c.ok for c in checks), checks=checks)


# --- claims against the ledger (docs/pipeline.md, "Verify") ---------------------------------------


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


def _norm_key(key: Any) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(key).lower()).strip("_")


def _same_value(a: Any, b: Any) -> bool:
    if json_text(a) == json_text(b):
        return True

    def plain(value: Any) -> str:
        return normalise(value if isinstance(value, str) else json_text(value)).strip("$€£ \"'")

    return plain(a) == plain(b)


def _call_label(call: CallRef) -> str:
    return f"{call.tool}#{call.tool_call_id} (call #{call.call_seq}, {call.status})"


def _outcome_word(outcome: str | None) -> str:
    return {"success": "success", "failure": "failure"}.get(str(outcome), str(outcome))


def claim_problems(text: Any, ledger: Ledger, label: str) -> list[str]:
    """What in `text` states an outcome or a verdict the ledger contradicts."""
    problems: list[str] = []
    side = [c for c in ledger.calls if c.side_effect]
    before: list[CallRef] = []
    for claim in claims(text):
        # A clause naming a tool speaks of every call of that tool: with mixed outcomes, prose
        # must name the call (its tool_call_id) it means. "It" speaks of the clause before's.
        own, _by_id = calls_named(claim.clause, ledger.calls)
        named = own or (before if claim.refers_back else [])
        before = own or before
        if claim.outcome not in (SUCCESS, FAILURE):
            pass
        elif named and (wrong := [c for c in named if not agrees(claim.outcome, c.status)]):
            problems.append(
                f"{label} states {_outcome_word(claim.outcome)} ({claim.clause[:60]!r}) "
                f"for {', '.join(_call_label(c) for c in wrong)}"
            )
        elif not own and claim.strong and side:
            if claim.outcome == SUCCESS:
                wrong = [c for c in side if c.status != "succeeded"]
            else:
                # A failure that names nothing needs some side effect that failed.
                wrong = [] if any(agrees(FAILURE, c.status) for c in side) else side
            if wrong:
                problems.append(
                    f"{label} states {_outcome_word(claim.outcome)} "
                    f"({claim.clause[:60]!r}) while the ledger has "
                    f"{', '.join(_call_label(c) for c in wrong)}"
                )
        if claim.approval is not None:
            problems.extend(_verdict_problems(claim.approval, claim.clause, ledger, label))
    return problems


def _verdict_problems(verdict: str, clause: str, ledger: Ledger, label: str) -> list[str]:
    wanted = "approve" if verdict == APPROVED else "reject"
    open_requests = [p["approval_seq"] for p in ledger.pending if p.get("kind") == "approval"]
    if wanted in ledger.verdicts.values():
        return []
    if open_requests or ledger.verdicts:
        where = (
            f"approval #{open_requests[0]} is still pending"
            if open_requests
            else "no approval was decided that way"
        )
        return [f"{label} states {verdict} ({clause[:60]!r}) but {where}"]
    return []


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


def _authority_of(event: Mapping[str, Any]) -> str:
    """Who an event speaks for, as facts name it."""
    kind = event.get("kind")
    if kind == "message":
        return "user" if event.get("role") == "user" else "model"
    if kind == "annotation":
        return str(event.get("authority"))
    if kind == "tool_result":
        return "tool"
    if kind in ("side_effect_resolution", "approval_decision"):
        return "operator"
    return "model"


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


def _faithful_fact(entry: Mapping[str, Any], events: list[Mapping[str, Any]]) -> bool:
    """The fact repeats what a cited annotation or a tool's verified fact says, key and value."""
    key = _norm_key(entry.get("key"))
    for event in events:
        if event.get("kind") == "annotation" and event.get("type") in ("fact", "correction"):
            payload = event.get("payload") or {}
            if _norm_key(payload.get("key")) == key and _same_value(
                payload.get("value"), entry.get("value")
            ):
                return True
        elif event.get("kind") == "tool_result":
            for fact in event.get("verified_facts") or []:
                if _norm_key(fact.get("key")) == key and _same_value(
                    fact.get("value"), entry.get("value")
                ):
                    return True
    return False


def _fact_text(entry: Mapping[str, Any]) -> str:
    key = str(entry.get("key") or "").replace("_", " ")
    value = entry.get("value")
    if isinstance(value, bool):
        return key if value else f"not {key}"
    if value is None:
        return key
    return f"{key} {value if isinstance(value, str) else json_text(value)}"


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else json_text(value)


def check_facts_cite_support(candidate: Mapping[str, Any], ledger: Ledger) -> Check:
    """A fact's citations carry it: a tool outcome cites that call's result or resolution with
    that status (not the call, not another call's result, not a message); any other fact cites
    an event that holds its value (the annotation with its key and value, a tool's verified
    fact, or a message or result whose words contain it)."""
    problems: list[str] = []
    confirmed = _latest_confirmed(ledger.previous, ledger.folded)
    for index, entry in enumerate(section_entries(candidate, "facts")):
        if _carried(ledger.previous, "facts", entry):
            continue
        if entry.get("authority") == "model" and _norm_key(entry.get("key")) in confirmed:
            continue  # a guess over a confirmed fact: no_model_override's to refuse
        label = _label("facts", index, entry)
        if not _sources(entry):
            problems.append(f"{label} cites nothing")
            continue
        visible = ledger.visible(entry)
        authority = entry.get("authority")
        if (
            authority in CONFIRMED_AUTHORITIES
            and ledger.all_visible(entry)
            and not any(_authority_of(e) == authority for e in visible)
        ):
            kinds = ", ".join(f"#{e['seq']} ({_authority_of(e)})" for e in visible)
            problems.append(f"{label} claims authority {authority!r} but cites {kinds}")
            continue
        if not visible or _faithful_fact(entry, visible):
            continue
        text = _fact_text(entry)
        outcomes = [c for c in claims(text) if c.outcome in (SUCCESS, FAILURE)]
        if outcomes:
            outcome = outcomes[0].outcome or ""
            named, by_id = calls_named(text, ledger.calls)
            answers = [
                e for e in visible if e.get("kind") in ("tool_result", "side_effect_resolution")
            ]
            good = [
                e
                for e in answers
                if agrees(outcome, call_status_after(e["kind"], e.get("status")))
                and (not named or ledger.call_of(e) in named)
            ]
            if good:
                continue
            if answers:
                first = answers[0]
                call = ledger.call_of(first)
                problems.append(
                    f"{label} states {outcome} but cites #{first['seq']}, "
                    f"{first['kind']} {first.get('status')!r}"
                    + (f" of {_call_label(call)}" if call is not None else "")
                )
            elif any(e.get("kind") == "tool_call" for e in visible):
                problems.append(f"{label} states {outcome} but cites the call, not its result")
            else:
                kinds = ", ".join(f"#{e['seq']} {e.get('kind')}" for e in visible)
                problems.append(f"{label} states a tool outcome but cites no result ({kinds})")
            continue
        named, by_id = calls_named(text, ledger.calls)
        cited_calls = [c for e in visible if (c := ledger.call_of(e)) is not None]
        if by_id and cited_calls and not any(c in named for c in cited_calls):
            problems.append(
                f"{label} names {', '.join(_call_label(c) for c in named)} but cites "
                f"{', '.join(_call_label(c) for c in cited_calls)}"
            )
            continue
        if any(c.outcome == UNCERTAIN for c in claims(text)) and cited_calls:
            continue
        value = _value_text(entry.get("value"))
        if not any(contains_words(value, event_text(e)) for e in visible):
            cited = ", ".join(f"#{e['seq']}" for e in visible)
            problems.append(f"{label} cites {cited}, which does not hold {value[:40]!r}")
    return _result("facts_cite_support", problems, "every fact is carried by what it cites")


def _latest_confirmed(
    previous: Mapping[str, Any] | None, events: Sequence[Mapping[str, Any]]
) -> dict[str, tuple[Any, int, str]]:
    """Key → (value, seq, kind) of its latest confirmed observation still in force (a
    retracted one no longer is; a reset in range leaves the earlier ones behind)."""
    latest: dict[str, tuple[Any, int, str]] = {}
    retracted = retracted_items(events)
    reset_at = last_reset(events)
    if reset_at is not None:
        previous = None
        events = [e for e in events if e["seq"] > reset_at]
    for entry in section_entries(previous or {}, "facts"):
        if (
            entry.get("status") == "active"
            and entry.get("authority") in CONFIRMED_AUTHORITIES
            and isinstance(entry.get("key"), str)
        ):
            seqs = [s for s in entry.get("source_event_ids") or [] if _is_int(s)]
            latest[_norm_key(entry["key"])] = (
                entry.get("value"),
                max(seqs, default=0),
                str(entry.get("kind") or "fact"),
            )
    for event in events:
        if event["seq"] in retracted:
            continue
        if (
            event["kind"] == "annotation"
            and event.get("type") in ("fact", "correction")
            and event.get("authority") in CONFIRMED_AUTHORITIES
        ):
            payload = event.get("payload") or {}
            latest[_norm_key(payload.get("key"))] = (
                payload.get("value"),
                event["seq"],
                str(event.get("type")),
            )
        elif event["kind"] == "tool_result":
            for fact in event.get("verified_facts") or []:
                latest[_norm_key(fact.get("key"))] = (fact.get("value"), event["seq"], "tool")
    return latest


def check_facts_current(
    candidate: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
    events: Sequence[Mapping[str, Any]],
) -> Check:
    """An active fact holds the latest confirmed value of its key: a superseded value is not
    presented as active, a corrected value does not come back, the current one is not marked
    superseded."""
    latest = _latest_confirmed(previous, events)
    problems: list[str] = []
    facts = section_entries(candidate, "facts")
    active_current: set[str] = set()
    for index, entry in enumerate(facts):
        key = _norm_key(entry.get("key"))
        if entry.get("status") != "active" or key not in latest:
            continue
        if entry.get("authority") == "model":
            continue  # a guess over a confirmed fact: no_model_override's to refuse
        value, seq, kind = latest[key]
        if _same_value(entry.get("value"), value):
            active_current.add(key)
            continue
        what = "undoes the correction" if kind == "correction" else "is superseded by"
        problems.append(
            f"{_label('facts', index, entry)} presents {json_text(entry.get('value'))[:40]} as "
            f"active, which {what} #{seq} ({json_text(value)[:40]})"
        )
    active_keys = {_norm_key(e.get("key")) for e in facts if e.get("status") == "active"}
    for key, (value, seq, _kind) in sorted(latest.items(), key=lambda item: item[1][1]):
        if key not in active_keys:
            problems.append(
                f"the confirmed fact {key} = {json_text(value)[:40]} (#{seq}) is not active"
            )
    for index, entry in enumerate(facts):
        key = _norm_key(entry.get("key"))
        if entry.get("status") != "superseded" or key not in latest or key in active_current:
            continue
        if _same_value(entry.get("value"), latest[key][0]):
            problems.append(
                f"{_label('facts', index, entry)} marks the current value superseded "
                f"(#{latest[key][1]})"
            )
    return _result("facts_current", problems, "every active fact holds its key's latest value")


def _expiring(event: Mapping[str, Any]) -> bool:
    payload = event.get("payload") or {}
    return (
        event.get("kind") == "annotation"
        and event.get("type") == "constraint"
        and bool(payload.get("expires") or payload.get("status") == "expired")
    )


def check_constraints_verbatim(candidate: Mapping[str, Any], ledger: Ledger) -> Check:
    """A constraint is kept verbatim: its text is the cited constraint's text (or words of the
    cited user message), and it is `expired` exactly when the log expired it."""
    problems: list[str] = []
    retracted = retracted_items(ledger.folded)
    expired_by: dict[int, int] = {}
    for event in ledger.folded:
        if _expiring(event) and event["seq"] not in retracted:
            for target in event.get("refers_to") or []:
                if _is_int(target):
                    expired_by[target] = event["seq"]
    for index, entry in enumerate(section_entries(candidate, "constraints")):
        if _carried(ledger.previous, "constraints", entry):
            continue
        label = _label("constraints", index, entry)
        if not _sources(entry):
            problems.append(f"{label} cites nothing")
        visible = ledger.visible(entry)
        text = normalise(entry.get("text", ""))
        stated = [
            e
            for e in visible
            if e.get("kind") == "annotation" and e.get("type") == "constraint" and not _expiring(e)
        ]
        messages = [e for e in visible if e.get("kind") == "message"]
        if stated:
            if not any(normalise((e.get("payload") or {}).get("text", "")) == text for e in stated):
                original = (stated[0].get("payload") or {}).get("text", "")
                problems.append(
                    f"{label} reads {str(entry.get('text', ''))[:50]!r}; the constraint "
                    f"#{stated[0]['seq']} reads {str(original)[:50]!r}"
                )
        elif messages:
            if not any(text in normalise(content_text(e.get("content"))) for e in messages):
                problems.append(
                    f"{label} is not the words of the message it cites "
                    f"(#{', #'.join(str(e['seq']) for e in messages)})"
                )
        elif visible:
            problems.append(
                f"{label} cites no constraint or message "
                f"(#{', #'.join(str(e['seq']) for e in visible)})"
            )
        sources = {s for s in _sources(entry) if _is_int(s)}
        expiry = sorted(expired_by[s] for s in sources if s in expired_by)
        if entry.get("status") == "active" and expiry:
            problems.append(f"{label} is active, but #{expiry[-1]} expired it")
        elif (
            entry.get("status") == "expired"
            and ledger.all_visible(entry)
            and not any(_expiring(e) for e in visible)
        ):
            problems.append(f"{label} is expired, but nothing in the log expired it")
    if last_reset(ledger.folded) is None:
        # A constraint is never dropped (only a reset leaves it behind; a retraction makes
        # the fold rebuild without the previous content).
        kept = {normalise(c.get("text", "")) for c in section_entries(candidate, "constraints")}
        for entry in section_entries(ledger.previous or {}, "constraints"):
            if normalise(entry.get("text", "")) not in kept:
                problems.append(
                    f"the constraint {str(entry.get('text', ''))[:50]!r} "
                    f"(#{', #'.join(str(s) for s in _sources(entry))}) was dropped"
                )
    return _result("constraints_verbatim", problems, "every constraint is kept verbatim")


def _sentences(text: str) -> list[str]:
    parts = [p for p in re.split(r"[.;!?\n]+", text) if p.strip()]
    return parts or [text]


DECISION_WORDS_SHARE = 0.75


def _words_held(text: str, events: list[Mapping[str, Any]]) -> bool:
    """Some sentence of a cited event holds (three quarters of) the words of `text`, and
    every number, negated alike."""
    negated = is_negated(text)
    for event in events:
        source = event_text(event)
        for sentence in [*_sentences(source), source]:
            if (
                contains_words(text, sentence, DECISION_WORDS_SHARE)
                and is_negated(sentence) == negated
            ):
                return True
    return False


def check_decisions_cite_support(candidate: Mapping[str, Any], ledger: Ledger) -> Check:
    """A decision cites what holds it: the decision annotation with its words, a message or
    result whose words it repeats (negated alike), or an approval's decision with the same
    verdict — never a verdict on an approval still pending."""
    problems: list[str] = []
    for index, entry in enumerate(section_entries(candidate, "decisions")):
        if _carried(ledger.previous, "decisions", entry):
            continue
        label = _label("decisions", index, entry)
        if not _sources(entry):
            problems.append(f"{label} cites nothing")
            continue
        visible = ledger.visible(entry)
        if not visible:
            continue
        text = str(entry.get("text") or "")
        verdicts = [c.approval for c in claims(text) if c.approval is not None]
        if entry.get("decision") in ("approve", "reject"):
            verdicts.append(APPROVED if entry["decision"] == "approve" else REJECTED)
        decided = [e for e in visible if e.get("kind") == "approval_decision"]
        requested = [e for e in visible if e.get("kind") == "approval_request"]
        if decided or requested:
            for verdict in verdicts:
                wanted = "approve" if verdict == APPROVED else "reject"
                seqs = {e.get("approval_seq") for e in decided} | {e["seq"] for e in requested}
                have = [ledger.verdicts.get(s) for s in seqs if _is_int(s)]
                if wanted not in have:
                    state = (
                        "is still pending"
                        if all(h is None for h in have)
                        else f"was decided {', '.join(str(h) for h in have if h)}"
                    )
                    problems.append(f"{label} states {verdict}, but the approval {state}")
            if decided or verdicts:
                continue
        annotations = [
            e for e in visible if e.get("kind") == "annotation" and e.get("type") == "decision"
        ]
        if any(
            normalise((e.get("payload") or {}).get("text", "")) == normalise(text)
            for e in annotations
        ):
            continue
        if not _words_held(text, visible):
            cited = ", ".join(f"#{e['seq']}" for e in visible)
            problems.append(f"{label} is not held by what it cites ({cited})")
    return _result("decisions_cite_support", problems, "every decision is held by what it cites")


def check_claims_match_ledger(candidate: Mapping[str, Any], ledger: Ledger) -> Check:
    """Facts and decisions that put their own words on a call (not a repetition of a cited
    annotation) state no outcome or verdict the ledger contradicts."""
    problems: list[str] = []
    for index, entry in enumerate(section_entries(candidate, "facts")):
        if entry.get("status") != "active" or _carried(ledger.previous, "facts", entry):
            continue
        if _faithful_fact(entry, ledger.visible(entry)):
            continue
        problems += claim_problems(_fact_text(entry), ledger, _label("facts", index, entry))
    for index, entry in enumerate(section_entries(candidate, "decisions")):
        if _carried(ledger.previous, "decisions", entry):
            continue
        visible = ledger.visible(entry)
        text = str(entry.get("text") or "")
        if any(e.get("kind") in ("approval_decision", "approval_request") for e in visible):
            continue  # judged against the approval by decisions_cite_support
        if any(normalise(text) in normalise(event_text(e)) for e in visible):
            continue  # the log's own words
        problems += claim_problems(text, ledger, _label("decisions", index, entry))
    return _result("claims_match_ledger", problems, "no entry states an outcome the log denies")


def check_narrative_matches_ledger(candidate: Mapping[str, Any], ledger: Ledger) -> Check:
    """The narrative is free text: it may state no outcome (succeeded, paid, refunded,
    failed, approved, ...) that the ledger contradicts, for a call it names or, for a plain or
    money-moving outcome, for any side effect."""
    narrative = candidate.get("narrative")
    problems = claim_problems(narrative, ledger, "narrative") if isinstance(narrative, str) else []
    return _result(
        "narrative_matches_ledger", problems, "the narrative states no outcome the log denies"
    )


def check_citations_fit_entries(candidate: Mapping[str, Any], ledger: Ledger) -> Check:
    """A request cites the user message that holds its words; a last reply the assistant
    message; the goal a user message or goal annotation with its words."""
    problems: list[str] = []
    for section, role in (("requests", "user"), ("last_replies", "assistant")):
        for index, entry in enumerate(section_entries(candidate, section)):
            if _carried(ledger.previous, section, entry):
                continue
            visible = ledger.visible(entry)
            if not visible:
                continue
            text = normalise(entry.get("text", ""))
            if not any(
                e.get("kind") == "message"
                and e.get("role") == role
                and text in normalise(content_text(e.get("content")))
                for e in visible
            ):
                problems.append(
                    f"{_label(section, index, entry)} is not the words of a {role} message it cites"
                )
    task = candidate.get("task")
    if isinstance(task, Mapping) and isinstance(task.get("goal"), str) and task["goal"]:
        visible = ledger.visible(task)
        if (
            visible
            and not (previous_task_same(ledger.previous, task))
            and not any(
                (e.get("kind") == "message" or e.get("type") == "goal")
                and contains_words(task["goal"], event_text(e))
                for e in visible
            )
        ):
            problems.append("task.goal is not held by the message or goal annotation it cites")
    return _result("citations_fit_entries", problems, "requests, replies and goal cite their words")


def previous_task_same(previous: Mapping[str, Any] | None, task: Mapping[str, Any]) -> bool:
    old = (previous or {}).get("task")
    return isinstance(old, Mapping) and old.get("goal") == task.get("goal")
