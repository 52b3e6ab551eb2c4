"""The checks that an entry's words are those of what it cites (threads.domain.verify): a
constraint is kept verbatim, and expired exactly when the log expired it
(`constraints_verbatim`); a decision is held by its citations (`decisions_cite_support`);
requests, last replies and the goal cite the messages that hold their words
(`citations_fit_entries`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from threads.domain.claims import (
    APPROVED,
    REJECTED,
    claims,
    contains_words,
    event_text,
    is_negated,
    normalise,
)
from threads.domain.entries import section_entries
from threads.domain.markers import last_reset, retracted_items
from threads.domain.render import content_text
from threads.domain.verify_ledger import Ledger, _carried, _sources
from threads.domain.verify_report import Check, _is_int, _label, _result


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
