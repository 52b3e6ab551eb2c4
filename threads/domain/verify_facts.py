"""The checks of a candidate's facts (threads.domain.verify): no model inference stands over a
confirmed observation (`no_model_override`), a fact is carried by what it cites
(`facts_cite_support`), and an active fact holds its key's latest confirmed value
(`facts_current`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from threads.domain.claims import (
    FAILURE,
    SUCCESS,
    UNCERTAIN,
    agrees,
    calls_named,
    claims,
    contains_words,
    event_text,
    normalise,
)
from threads.domain.entries import json_text, section_entries
from threads.domain.fold import CONFIRMED_AUTHORITIES
from threads.domain.ledger import call_status_after
from threads.domain.markers import last_reset, retracted_items
from threads.domain.verify_ledger import Ledger, _call_label, _carried, _sources
from threads.domain.verify_report import Check, _is_int, _label, _result


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


def _norm_key(key: Any) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(key).lower()).strip("_")


def _same_value(a: Any, b: Any) -> bool:
    if json_text(a) == json_text(b):
        return True

    def plain(value: Any) -> str:
        return normalise(value if isinstance(value, str) else json_text(value)).strip("$€£ \"'")

    return plain(a) == plain(b)


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
