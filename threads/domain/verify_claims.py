"""The checks that an entry's own words state no outcome or verdict the ledger denies
(threads.domain.verify): facts' and decisions' (`claims_match_ledger`) and the narrative's
(`narrative_matches_ledger`). `claim_problems` reads a text's claims (threads.domain.claims)
against the ledger.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from threads.domain.claims import (
    APPROVED,
    FAILURE,
    SUCCESS,
    CallRef,
    agrees,
    calls_named,
    claims,
    event_text,
    normalise,
)
from threads.domain.entries import section_entries
from threads.domain.verify_facts import _fact_text, _faithful_fact
from threads.domain.verify_ledger import Ledger, _call_label, _carried
from threads.domain.verify_report import Check, _label, _result


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
