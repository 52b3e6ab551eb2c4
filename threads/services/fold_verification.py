"""Phase 2 of the fold pipeline (threads.services.folding): run every check on a prepared
candidate against the log it claims to fold, re-read, with its checksum and its fit in the
thread's budget.
"""

from __future__ import annotations

from typing import Any

from threads.domain import chain, tokens
from threads.domain.budget import thread_budget
from threads.domain.fold import world_state
from threads.domain.verify import verify_candidate
from threads.domain.verify_citations import cited_seqs
from threads.domain.verify_report import Check, Verification
from threads.keys.chain import thread_genesis, thread_key
from threads.models import SummaryVersion
from threads.selectors import event_dict, events_by_seqs
from threads.selectors.redactions import redaction_verdict
from threads.services.fold_preparation import _base_version, event_dicts_for_fold
from threads.services.integrity import summary_checksum

# --- phase 2: verify ----------------------------------------------------------------------------


def summary_verify(*, version: SummaryVersion) -> Verification:
    """Run every check on a candidate against the log it claims to fold.

    The chain hash at the boundary (the stored hash of event R, which the candidate records)
    must equal a fresh recomputation of the chain over (c, R] from the base version's chain
    hash (or the genesis hash), so a rewritten row in the folded range fails the fold.
    """
    base = _base_version(version.thread_id, version.base_version)
    covered = base.covered_until if base is not None else 0
    previous = base.content if base is not None else None
    # A rebuild (see rebuild_start) folded from an earlier seq than the head's covered_until,
    # on the head's world state: it is checked against what it folded.
    start = min(version.covered_from - 1, covered)
    if start < covered:
        previous = world_state(previous) if start > 0 else None
    events = event_dicts_for_fold(
        version.thread_id, after=start, until=version.covered_until, chain_fields=True
    )
    key_id = version.thread.chain_key_id
    start_hash = base.chain_hash if base is not None else thread_genesis(version.thread_id, key_id)
    key = thread_key(version.thread)
    verdict = chain.verify_chain(
        [e for e in events if e["seq"] > covered],
        start_hash=start_hash,
        start_seq=covered,
        key=key,
        redactions=redaction_verdict(thread_id=version.thread_id, key=key).trusted,
    )
    if verdict.ok and verdict.verified_until == version.covered_until:
        expected = verdict.head
    else:
        bad = verdict.first_bad_seq or verdict.verified_until + 1
        expected = f"chain broken at seq {bad}: {verdict.detail or 'missing events'}"
    result = verify_candidate(
        candidate=version.content,
        previous=previous,
        events=events,
        base_covered_until=start,
        boundary=version.covered_until,
        chain_hash_at_boundary=version.chain_hash,
        expected_chain_hash=expected,
        cited_events=cited_events_before(version, start),
    )
    checksum_ok = version.checksum == summary_checksum(version)
    result.checks.append(
        Check(
            name="checksum",
            ok=checksum_ok,
            detail="the stored checksum recomputes"
            if checksum_ok
            else "the candidate changed after it was prepared: its checksum does not recompute",
        )
    )
    result.checks.append(_fits_budget(version))
    result.ok = result.ok and checksum_ok and result.checks[-1].ok
    return result


def cited_events_before(version: SummaryVersion, start: int) -> dict[int, dict[str, Any]]:
    """The events at or before `start` that the candidate cites: the claim checks read what
    an older citation says (docs/pipeline.md, "Verify")."""
    seqs = {s for s in cited_seqs(version.content) if 0 < s <= start}
    if not seqs:
        return {}
    return {e.seq: event_dict(e) for e in events_by_seqs(thread=version.thread, seqs=seqs)}


def _fits_budget(version: SummaryVersion) -> Check:
    """The candidate's rendered text, counted again, leaves room in the thread's budget: a
    head summary that does not fit makes every context request `budget_too_small`."""
    thread = version.thread
    available = thread_budget(thread).available
    counted = tokens.count_text(version.rendered, thread.encoding)
    if counted <= available:
        return Check(
            name="fits_budget",
            ok=True,
            detail=f"{counted} tokens, within the {available} available",
        )
    return Check(
        name="fits_budget",
        ok=False,
        detail=f"the summary is {counted} tokens, more than the {available} the thread's "
        "budget has available",
    )
