"""Phase 1 of the fold pipeline (threads.services.folding): read the head, fix the boundary,
fold the events after the head (or, after a retraction of a covered event, rebuild from the
last reset) with the thread's summariser, and store the candidate as `prepared`.
"""

from __future__ import annotations

import functools
from typing import Any

from django.conf import settings
from django.db import transaction

from threads.domain import tokens
from threads.domain.budget import Budget, fold_target, thread_budget
from threads.domain.fold import world_state
from threads.domain.markers import answered_calls, retraction_targets
from threads.domain.summary_fit import fit_summary
from threads.domain.summary_render import render_summary
from threads.domain.units import last_closed_boundary, split_units
from threads.models import SummaryPhase, SummaryVersion, Thread
from threads.selectors import event_dicts, last_reset_at, retracted_calls
from threads.services.integrity import summary_checksum
from threads.summarizers import get_summarizer

# One fold reads at most this many events after the head, so a process folding a long backlog
# (an imported 100k-event trace) stays in bounded memory; the rest folds in the next versions.
FOLD_MAX_EVENTS = int(getattr(settings, "CTXADMIN_FOLD_MAX_EVENTS", 20000))


# --- phase 1: prepare ---------------------------------------------------------------------------


def _head(thread_id: Any) -> dict[str, Any]:
    return dict(
        Thread.objects.values(
            "id",
            "head_version",
            "covered_until",
            "last_seq",
            "summarizer",
            "encoding",
            "context_window",
            "fixed_tokens",
            "tool_tokens",
            "reserved_output",
            "reasoning_reserve",
            "safety_margin",
            "low_watermark",
            "pinned_at",
        ).get(pk=thread_id)
    )


def _base_version(thread_id: Any, version: int) -> SummaryVersion | None:
    if version == 0:
        return None
    return SummaryVersion.objects.get(thread_id=thread_id, version=version)


def fold_boundary(
    *,
    events: list[dict[str, Any]],
    after: int,
    trigger_kind: str,
    summary_tokens: int = 0,
    budget: Budget | None = None,
    low: float = 0.5,
) -> int:
    """Where this fold stops: the end of the last closed unit after `after`.

    A capacity fold stops at the first closed unit end that brings the history down to
    low × B (recent closed units stay raw for the agent); every other trigger folds all that
    is closed, because its point is to get a state change into the summary.
    """
    if trigger_kind == "capacity" and budget is not None:
        target = fold_target(events=events, summary_tokens=summary_tokens, budget=budget, low=low)
        return target if target is not None else after
    return last_closed_boundary(split_units(events), after=after)


def fold_prepare(
    *, thread_id: Any, trigger: dict[str, Any], task_id: str | None = None
) -> SummaryVersion | None:
    """Fold the events after the head into a `prepared` candidate, or None when there is
    nothing new to fold or the thread is pinned (docs/repairs.md, "Rollback"). Takes the thread's
    row lock (select_for_update) only to number the version, and re-checks the pin under it: a pin
    set while the summariser ran leaves no candidate behind. The fold itself runs on an
    unlocked read of an immutable prefix of the log."""
    head = _head(thread_id)
    if head["pinned_at"] is not None:
        return None
    base_version, covered = head["head_version"], head["covered_until"]
    base = _base_version(thread_id, base_version)
    read_until = min(head["last_seq"], covered + FOLD_MAX_EVENTS)
    events = event_dicts_for_fold(thread_id, after=covered, until=read_until)
    budget = thread_budget(head)
    boundary = fold_boundary(
        events=events,
        after=covered,
        trigger_kind=trigger.get("kind", "manual"),
        summary_tokens=base.tokens if base is not None else 0,
        budget=budget,
        low=head["low_watermark"],
    )
    if boundary <= covered and read_until < head["last_seq"]:
        # One open unit longer than the read cap: read it whole rather than never fold.
        events = event_dicts_for_fold(thread_id, after=covered, until=head["last_seq"])
        boundary = last_closed_boundary(split_units(events), after=covered)
    if boundary <= covered:
        return None
    folded = [e for e in events if e["seq"] <= boundary]
    del events
    previous = base.content if base is not None else None
    start = rebuild_start(thread_id, covered=covered, events=folded)
    fold_events = folded
    if start < covered:
        previous = world_state(previous) if start > 0 else None
        fold_events = event_dicts_for_fold(thread_id, after=start, until=boundary)
    summarizer = get_summarizer(head["summarizer"])
    content = summarizer.fold(
        previous=previous,
        events=fold_events,
        covered_from=start + 1,
        covered_until=boundary,
    )
    # At most low × available tokens, whatever the summariser made (docs/pipeline.md,
    # "Fold with a summariser backend").
    content = fit_summary(
        content,
        events=fold_events,
        limit=summary_limit(budget, head["low_watermark"]),
        count=functools.partial(tokens.count_text, encoding=head["encoding"]),
    )
    rendered = render_summary(content)
    candidate = SummaryVersion(
        thread_id=thread_id,
        base_version=base_version,
        phase=SummaryPhase.PREPARED,
        covered_from=start + 1,
        covered_until=boundary,
        chain_hash=folded[-1]["hash"],
        trigger=trigger,
        backend=getattr(summarizer, "name", head["summarizer"]),
        content=content,
        rendered=rendered,
        tokens=tokens.count_text(rendered, head["encoding"]),
        tokens_replaced=sum(int(e.get("token_count", 0)) for e in folded),
        task_id=task_id or "",
    )
    candidate.checksum = summary_checksum(candidate)
    with transaction.atomic(durable=True):
        locked = Thread.objects.select_for_update().get(pk=thread_id)
        if locked.pinned_at is not None:
            return None
        candidate.version = locked.last_version + 1
        Thread.objects.filter(pk=thread_id).update(last_version=candidate.version)
        candidate.save(force_insert=True)
    return candidate


def summary_limit(budget: Budget, low: float) -> int:
    """The most tokens a fold's summary may take: low × available, so that after a fold the
    events that follow have the room up to the high watermark (docs/pipeline.md,
    "Fold with a summariser backend")."""
    return max(int(low * budget.available), 0)


def rebuild_start(thread_id: Any, *, covered: int, events: list[dict[str, Any]]) -> int:
    """Where a fold of `events` (after the head's `covered`) starts folding: `covered`,
    rolling on from the head; or, to rebuild the content from a reset (its seq; 0: from the
    start):
    - when one of them retracts an event the head covers (after the last reset the head saw,
      which already left that event behind): from that reset, without the event;
    - when one of them answers a call that a retraction the head covers took out (an operator
      resolves a retracted refund): the answer is retracted with its call, which only a fold
      that sees the call and its retraction knows; from the last reset before the call."""
    thread = Thread(pk=thread_id)
    start = covered
    targets = [t for t in retraction_targets(events) if t <= covered]
    if targets:
        reset = last_reset_at(thread=thread, until=covered)
        if max(targets) > reset:
            start = reset
    gone = retracted_calls(
        thread=thread, calls=answered_calls(events, until=covered), until=covered
    )
    if gone:
        start = min(start, last_reset_at(thread=thread, until=min(gone)))
    return start


def event_dicts_for_fold(
    thread_id: Any, *, after: int, until: int, chain_fields: bool = False
) -> list[dict[str, Any]]:
    """`chain_fields`: with the chain's salt and digest, for the verification, which
    recomputes the chain over them."""
    if until <= after:
        return []
    return event_dicts(Thread(pk=thread_id), after=after, until=until, chain_fields=chain_fields)
