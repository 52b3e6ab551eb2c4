"""The fold pipeline (docs/design.md §5): prepare → verify → commit by compare-and-swap.

1. `fold_prepare` reads the head S_k (covered_until c) without a lock, fixes the boundary R (the
   end of the last closed interaction unit after c), folds (c, R] with the thread's summariser
   and stores the candidate as `prepared` with its checksum. Only the numbering takes the
   thread's row lock: version numbers come from thread.last_version, so they only increase and
   every row, whatever becomes of it, has its own number.
2. `summary_verify` re-reads what the candidate stands on and runs every check (plus: the
   stored checksum still recomputes, which matters to a candidate that waited for recovery).
3. `summary_commit` writes, in ONE transaction, the version as committed, its checkpoint and the
   compare-and-swap of the thread head (`WHERE head_version = base`). Zero rows swapped means
   another fold (or a rollback) won: the candidate is discarded, never written over the winner.
   A failed check leaves the head alone and marks the candidate rejected with its report.

A retraction in (c, R] of an event the head already covers makes the head's content stale: that
fold rebuilds the content from the last reset at or before c (or from seq 1) on the head's
world state (tool state and pending approvals), rather than rolling on from the head, and its
candidate says so by `covered_from` (the reset's seq + 1, below c + 1). Rare; correctness
over speed: it reads the events since that reset.

Events appended during a fold are after R, so they stay in the working context and the next
fold picks them up: never lost, never counted twice. A worker that dies between prepare and
commit leaves a `prepared` row that `recover_prepared` re-verifies and commits (when the head
is still the one it was built on) or discards.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from threads.domain import chain, tokens
from threads.domain.budget import Budget, fold_target, thread_budget
from threads.domain.errors import Conflict
from threads.domain.fold import world_state
from threads.domain.markers import retraction_targets
from threads.domain.summary_fit import fit_summary
from threads.domain.summary_render import render_summary
from threads.domain.units import last_closed_boundary, split_units
from threads.domain.verify import verify_candidate
from threads.domain.verify_citations import cited_seqs
from threads.domain.verify_report import Check, Verification
from threads.keys.chain import thread_genesis, thread_key
from threads.models import (
    SummaryPhase,
    SummaryVersion,
    TaskRun,
    TaskState,
    Thread,
)
from threads.selectors import event_dict, event_dicts, events_by_seqs, last_reset_at
from threads.services.audit import audit_record
from threads.services.checkpoints import checkpoint_record, pending_at
from threads.services.enqueue import FOLD_THREAD, task_run_enqueue
from threads.services.integrity import summary_checksum
from threads.services.metrics import CAS_CONFLICTS, PREPARED_RECOVERED, metric_add
from threads.services.tasks import task_run_finish
from threads.summarizers import get_summarizer

__all__ = [
    "FOLD_MAX_EVENTS",
    "FoldResult",
    "Outcome",
    "ThreadPinned",
    "after_fold_hooks",
    "checkpoint_record",
    "fold_in_flight",
    "fold_prepare",
    "fold_request",
    "fold_run",
    "pending_at",
    "recover_prepared",
    "summary_commit",
    "summary_decide",
    "summary_verify",
    "thread_pinned",
]

logger = logging.getLogger(__name__)

TRIGGER_KINDS = ("capacity", "structural", "risk", "manual", "rollback")
# One fold reads at most this many events after the head, so a process folding a long backlog
# (an imported 100k-event trace) stays in bounded memory; the rest folds in the next versions.
FOLD_MAX_EVENTS = int(getattr(settings, "CTXADMIN_FOLD_MAX_EVENTS", 20000))
OPEN_STATES = (TaskState.PENDING, TaskState.STARTED, TaskState.PROGRESS)
ORPHANED = "its worker died before recording the end"
SUPERSEDED = "not finished within CTXADMIN_PREPARED_TIMEOUT; a new fold took over"
RECOVERY_TRIGGER = {"kind": "manual", "reason": "recovery: a requested fold never finished"}


class Outcome:
    COMMITTED = "committed"
    REJECTED = "rejected"
    DISCARDED = "discarded"  # the head moved: another fold or a rollback won
    ALREADY_DECIDED = "already_decided"  # someone (recovery, a redelivery) got there first


class ThreadPinned(Conflict):
    """The thread is pinned (docs/design.md §6.3): no fold starts until the pin is released."""

    code = "thread_pinned"


def pinned_problem(thread: Thread) -> ThreadPinned:
    when = thread.pinned_at.isoformat() if thread.pinned_at else "?"
    return ThreadPinned(
        f"folds of this thread are paused: pinned by {thread.pinned_by or 'someone'} at "
        f"{when} ({thread.pin_reason}); release the pin to fold again",
        fields={"pinned_by": thread.pinned_by, "pinned_at": when},
    )


@dataclass
class FoldResult:
    version: SummaryVersion | None  # None: nothing new to fold
    outcome: str  # an Outcome, or "noop"


def _now() -> Any:
    return timezone.now()


# Called after fold_run with (thread id, trigger, FoldResult): the fold triggers register the
# decision whether to fold again (threads.services.triggers), so folding never imports them.
after_fold_hooks: list[Callable[[Any, dict[str, Any], FoldResult], None]] = []


# --- requests: at most one fold in flight per thread -------------------------------------------


def fold_in_flight(thread: Thread, *, now: Any = None) -> bool:
    """A fold was requested recently enough that its worker is presumed alive."""
    return bool(
        thread.fold_task_id
        and thread.fold_requested_at is not None
        and (now or _now()) - thread.fold_requested_at < settings.CTXADMIN_PREPARED_TIMEOUT
    )


def fold_request(*, thread: Thread, trigger: dict[str, Any], actor: Any = None) -> TaskRun:
    """Ask for a fold of `thread`; the Celery task is sent after commit.

    At most one fold is in flight per thread: under the thread's row lock, a queued or running
    fold (thread.fold_task_id) answers for this request too, unless it is older than
    CTXADMIN_PREPARED_TIMEOUT (its worker died, or the broker lost its message), in which case
    it is replaced and its run ends, superseded by the new one. Not durable on
    purpose: services that fold after their own change (a rollback) call it inside their
    transaction, and the task is still sent only once that commits. A pinned thread folds
    nothing: ThreadPinned, and nothing is requested.
    """
    if trigger.get("kind") not in TRIGGER_KINDS:
        raise ValueError(f"unknown trigger kind {trigger.get('kind')!r}")
    now = _now()
    with transaction.atomic():
        locked = Thread.objects.select_for_update().select_related("workspace").get(pk=thread.pk)
        if locked.pinned_at is not None:
            raise pinned_problem(locked)
        if locked.fold_task_id:
            fresh = fold_in_flight(locked, now=now)
            existing = TaskRun.objects.filter(pk=locked.fold_task_id).first()
            if fresh and existing is not None and existing.state in OPEN_STATES:
                return existing
        else:
            existing = None
        run = task_run_enqueue(
            workspace=locked.workspace,
            thread=locked,
            kind="fold",
            task_name=FOLD_THREAD,
            args=(str(locked.pk), trigger),
        )
        if existing is not None and existing.state in OPEN_STATES:
            # Nobody will finish it: a client waiting on its id learns who took over.
            task_run_finish(
                existing.pk,
                ok=True,
                result={"folded": False, "superseded_by": run.id, "reason": SUPERSEDED},
            )
        Thread.objects.filter(pk=locked.pk).update(fold_task_id=run.id, fold_requested_at=now)
        thread.fold_task_id, thread.fold_requested_at = run.id, now
        audit_record(
            workspace=locked.workspace,
            actor=actor,
            action="fold_requested",
            target_type="thread",
            target_id=locked.pk,
            thread=locked,
            after={"task_id": run.id, "trigger": trigger},
            actor_label=getattr(actor, "label", "") if actor is not None else "fold trigger",
        )
    return run


def thread_pinned(thread_id: Any) -> bool:
    """The thread is pinned now (docs/design.md §6.3): its folds are paused."""
    return Thread.objects.filter(pk=thread_id, pinned_at__isnull=False).exists()


def _fold_request_done(thread_id: Any, task_id: str | None) -> None:
    """Clear the in-flight marker, but only our own: a newer request may have replaced it."""
    if task_id:
        Thread.objects.filter(pk=thread_id, fold_task_id=task_id).update(
            fold_task_id="", fold_requested_at=None
        )


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
    nothing new to fold or the thread is pinned (docs/design.md §6.3). Takes the thread's row
    lock (select_for_update) only to number the version, and re-checks the pin under it: a pin
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
    # At most low × available tokens, whatever the summariser made (docs/design.md §5.2).
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
    events that follow have the room up to the high watermark (docs/design.md §5.2)."""
    return max(int(low * budget.available), 0)


def rebuild_start(thread_id: Any, *, covered: int, events: list[dict[str, Any]]) -> int:
    """Where a fold of `events` (after the head's `covered`) starts folding: `covered`,
    rolling on from the head; or, when one of them retracts an event the head covers (after
    the last reset the head saw, which already left that event behind), the seq of that reset
    (0: from the start), to rebuild the content without it."""
    targets = [t for t in retraction_targets(events) if t <= covered]
    if not targets:
        return covered
    reset = last_reset_at(thread=Thread(pk=thread_id), until=covered)
    return reset if max(targets) > reset else covered


def event_dicts_for_fold(thread_id: Any, *, after: int, until: int) -> list[dict[str, Any]]:
    if until <= after:
        return []
    return event_dicts(Thread(pk=thread_id), after=after, until=until)


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
    events = event_dicts_for_fold(version.thread_id, after=start, until=version.covered_until)
    key_id = version.thread.chain_key_id
    start_hash = base.chain_hash if base is not None else thread_genesis(version.thread_id, key_id)
    verdict = chain.verify_chain(
        [e for e in events if e["seq"] > covered],
        start_hash=start_hash,
        start_seq=covered,
        key=thread_key(version.thread),
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
    an older citation says (docs/design.md §5.4)."""
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


# --- phase 3: commit ----------------------------------------------------------------------------


def summary_commit(
    *, version: SummaryVersion, verification: Verification, actor_label: str = "fold"
) -> str:
    """Decide a prepared candidate in one transaction; return an Outcome.

    Claims the row (prepared → committed only if still prepared, so a redelivered task and
    the recovery sweep cannot both decide it), then compare-and-swaps the thread head, only
    while the thread is not pinned. Zero rows swapped: the head moved since the candidate was
    built (or a pin holds it where a rollback put it), so it is discarded in the same
    transaction and the head stays untouched.
    """
    report = verification.as_dict()
    now = _now()
    with transaction.atomic(durable=True):
        phase = SummaryPhase.COMMITTED if verification.ok else SummaryPhase.REJECTED
        claimed = SummaryVersion.objects.filter(pk=version.pk, phase=SummaryPhase.PREPARED).update(
            phase=phase, verification=report, decided_at=now
        )
        if not claimed:
            version.refresh_from_db(fields=["phase", "verification", "decided_at"])
            return Outcome.ALREADY_DECIDED
        thread = Thread.objects.select_related("workspace").get(pk=version.thread_id)
        version.verification, version.decided_at, version.phase = report, now, phase
        if not verification.ok:
            failed = [c["name"] for c in report["checks"] if not c["ok"]]
            audit_record(
                workspace=thread.workspace,
                actor=None,
                action="summary_rejected",
                target_type="summary_version",
                target_id=version.version,
                thread=thread,
                after={"failed_checks": failed, "base_version": version.base_version},
                actor_label=actor_label,
            )
            return Outcome.REJECTED
        swapped = Thread.objects.filter(
            pk=version.thread_id, head_version=version.base_version, pinned_at__isnull=True
        ).update(head_version=version.version, covered_until=version.covered_until, updated_at=now)
        if not swapped:
            SummaryVersion.objects.filter(pk=version.pk).update(phase=SummaryPhase.DISCARDED)
            metric_add([(CAS_CONFLICTS, "", 1)], thread_id=version.thread_id)
            version.phase = SummaryPhase.DISCARDED
            after: dict[str, Any] = {"head_version": thread.head_version}
            if thread.pinned_at is not None:
                after["pinned_by"] = thread.pinned_by
            _audit_discarded(thread, version, after=after, label=actor_label)
            return Outcome.DISCARDED
        checkpoint_record(
            thread=thread,
            version=version,
            cursor=version.covered_until,
            chain_hash=version.chain_hash,
            summary_checksum=version.checksum,
            label=f"v{version.version} ({version.trigger.get('kind', 'fold')})",
        )
        audit_record(
            workspace=thread.workspace,
            actor=None,
            action="summary_committed",
            target_type="summary_version",
            target_id=version.version,
            thread=thread,
            before={"head_version": version.base_version, "covered_until": thread.covered_until},
            after={
                "head_version": version.version,
                "covered_until": version.covered_until,
                "trigger": version.trigger,
            },
            actor_label=actor_label,
        )
    return Outcome.COMMITTED


# --- the whole pipeline -------------------------------------------------------------------------


def summary_decide(*, version: SummaryVersion, actor_label: str = "fold") -> str:
    """Verify a prepared candidate and commit, reject or discard it."""
    return summary_commit(
        version=version, verification=summary_verify(version=version), actor_label=actor_label
    )


def fold_once(*, thread_id: Any, trigger: dict[str, Any], task_id: str | None = None) -> FoldResult:
    """Prepare, verify and commit one fold; on a lost race rebuild once on the new head."""
    result = FoldResult(version=None, outcome="noop")
    for _attempt in range(2):
        version = fold_prepare(thread_id=thread_id, trigger=trigger, task_id=task_id)
        if version is None:
            return result if result.version is not None else FoldResult(None, "noop")
        result = FoldResult(version=version, outcome=summary_decide(version=version))
        if result.outcome != Outcome.DISCARDED:
            break
    return result


def fold_run(
    *, thread_id: Any, trigger: dict[str, Any], task_id: str | None = None
) -> SummaryVersion | None:
    """The fold task's body: idempotent, safe to redeliver.

    A redelivered task first finishes the candidate it prepared before dying (same task id).
    Then it folds once (rebuilding once if it lost the race). When a capped fold leaves a
    closed backlog, or a rejected candidate calls for a retry, it asks for the next fold.
    Clears the thread's in-flight marker when done, whatever happened.
    """
    try:
        leftover = (
            SummaryVersion.objects.filter(
                thread_id=thread_id, task_id=task_id, phase=SummaryPhase.PREPARED
            )
            .order_by("-version")
            .first()
            if task_id
            else None
        )
        if leftover is not None:
            outcome = summary_decide(version=leftover)
            result = FoldResult(leftover, outcome)
            if outcome in (Outcome.DISCARDED, Outcome.ALREADY_DECIDED):
                result = fold_once(thread_id=thread_id, trigger=trigger, task_id=task_id)
        else:
            result = fold_once(thread_id=thread_id, trigger=trigger, task_id=task_id)
    finally:
        _fold_request_done(thread_id, task_id)
    _follow_up(thread_id, trigger, result)
    return result.version


def _follow_up(thread_id: Any, trigger: dict[str, Any], result: FoldResult) -> None:
    """Hand the decided fold to the after-fold hooks: whether to fold again is theirs."""
    for hook in after_fold_hooks:
        hook(thread_id, trigger, result)


# --- recovery -----------------------------------------------------------------------------------


def recover_prepared(*, older_than: timedelta) -> list[SummaryVersion]:
    """Decide every `prepared` candidate older than `older_than` (its worker died).

    Re-verified and committed by CAS when the head is still the one it was built on and every
    check passes; discarded when the head moved; rejected when a check fails. A live worker
    that comes back later finds the row decided and stops (summary_commit claims the row).
    """
    cutoff = _now() - older_than
    decided: list[SummaryVersion] = []
    stale = SummaryVersion.objects.filter(
        phase=SummaryPhase.PREPARED, created_at__lt=cutoff
    ).order_by("thread_id", "version")
    for version in stale:
        head_version = Thread.objects.values_list("head_version", flat=True).get(
            pk=version.thread_id
        )
        if head_version != version.base_version:
            outcome = _discard(version, reason=f"the head moved to v{head_version}")
        else:
            outcome = summary_decide(version=version, actor_label="recovery")
        if outcome == Outcome.ALREADY_DECIDED:
            continue
        decided.append(version)
        metric_add([(PREPARED_RECOVERED, "", 1)], thread_id=version.thread_id)
        if version.task_id:
            task_run_finish(
                version.task_id,
                ok=outcome != Outcome.REJECTED,
                result={
                    "recovered": True,
                    "version": version.version,
                    "outcome": outcome,
                },
            )
            _fold_request_done(version.thread_id, version.task_id)
    # In-flight markers whose worker died before preparing anything, or whose message the
    # broker lost: the fold they stand for is still due, so it is requested again (which ends
    # the dead run as superseded); a marker whose run ended after all is only cleared.
    expired = _now() - settings.CTXADMIN_PREPARED_TIMEOUT
    markers = Thread.objects.filter(fold_requested_at__lt=expired).exclude(fold_task_id="")
    for thread in markers.select_related("workspace"):
        open_run = TaskRun.objects.filter(pk=thread.fold_task_id, state__in=OPEN_STATES)
        if thread.pinned_at is None and open_run.exists():
            try:
                fold_request(thread=thread, trigger=RECOVERY_TRIGGER)
                continue
            except ThreadPinned:
                pass  # pinned since it was read: the fold is not due until the release
        if open_run.exists():
            task_run_finish(
                thread.fold_task_id,
                ok=True,
                result={"folded": False, "reason": "the thread is pinned"},
            )
        _fold_request_done(thread.pk, thread.fold_task_id)
    _end_orphaned_runs(older_than=expired)
    return decided


def _end_orphaned_runs(*, older_than: Any) -> None:
    """End fold runs still open long after their thread stopped pointing at them: their
    worker died after the fold (which clears the marker) and before the run's end was
    recorded, or a newer request took over. Each ends with what it left behind; should its
    message still be delivered, the task records its own end over this one."""
    live = Thread.objects.exclude(fold_task_id="").values("fold_task_id")
    orphans = TaskRun.objects.filter(
        kind="fold", state__in=OPEN_STATES, created_at__lt=older_than
    ).exclude(pk__in=live)
    for run in orphans:
        version = SummaryVersion.objects.filter(task_id=run.pk).order_by("-version").first()
        task_run_finish(
            run.pk,
            ok=True,
            result={
                "folded": version is not None and version.phase == SummaryPhase.COMMITTED,
                "version": version.version if version is not None else None,
                "phase": version.phase if version is not None else None,
                "recovered": True,
                "reason": ORPHANED,
            },
        )


def _discard(version: SummaryVersion, *, reason: str) -> str:
    with transaction.atomic(durable=True):
        changed = SummaryVersion.objects.filter(pk=version.pk, phase=SummaryPhase.PREPARED).update(
            phase=SummaryPhase.DISCARDED, decided_at=_now()
        )
        if not changed:
            return Outcome.ALREADY_DECIDED
        thread = Thread.objects.select_related("workspace").get(pk=version.thread_id)
        _audit_discarded(thread, version, after={"reason": reason}, label="recovery")
    version.phase = SummaryPhase.DISCARDED
    return Outcome.DISCARDED


def _audit_discarded(
    thread: Thread, version: SummaryVersion, *, after: dict[str, Any], label: str
) -> None:
    """Audit a candidate that will never be decided on its merits: its base is no longer the
    head (another fold or a rollback won)."""
    audit_record(
        workspace=thread.workspace,
        actor=None,
        action="summary_discarded",
        target_type="summary_version",
        target_id=version.version,
        thread=thread,
        before={"base_version": version.base_version},
        after=after,
        actor_label=label,
    )
