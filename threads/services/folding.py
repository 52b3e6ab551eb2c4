"""The fold pipeline (docs/pipeline.md, "Rolling fold, verification, atomic commit"): prepare →
verify → commit by compare-and-swap.

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
candidate says so by `covered_from` (the reset's seq + 1, below c + 1). So does an answer in
(c, R] to a call a retraction at or before c took out, from the last reset before the call
(fold_preparation.rebuild_start). Rare; correctness over speed: it reads the events since
that reset.

Events appended during a fold are after R, so they stay in the working context and the next
fold picks them up: never lost, never counted twice. A worker that dies between prepare and
commit leaves a `prepared` row that `recover_prepared` re-verifies and commits (when the head
is still the one it was built on) or discards.

This module commits (3) and runs the pipeline (`fold_run`); the other steps are modules beside
it: fold_requests (at most one fold in flight), fold_preparation (1), fold_verification (2) and
fold_recovery (`recover_prepared`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from threads.domain.verify_report import Verification
from threads.models import SummaryPhase, SummaryVersion, Thread
from threads.services.audit import audit_record
from threads.services.checkpoints import checkpoint_record
from threads.services.fold_preparation import fold_prepare
from threads.services.fold_requests import _fold_request_done, _now
from threads.services.fold_verification import summary_verify
from threads.services.metrics import CAS_CONFLICTS, metric_add

__all__ = [
    "FoldResult",
    "Outcome",
    "after_fold_hooks",
    "fold_run",
    "summary_commit",
    "summary_decide",
]

logger = logging.getLogger(__name__)


class Outcome:
    COMMITTED = "committed"
    REJECTED = "rejected"
    DISCARDED = "discarded"  # the head moved: another fold or a rollback won
    ALREADY_DECIDED = "already_decided"  # someone (recovery, a redelivery) got there first


@dataclass
class FoldResult:
    version: SummaryVersion | None  # None: nothing new to fold
    outcome: str  # an Outcome, or "noop"


# Called after fold_run with (thread id, trigger, FoldResult): the fold triggers register the
# decision whether to fold again (threads.services.triggers), so folding never imports them.
after_fold_hooks: list[Callable[[Any, dict[str, Any], FoldResult], None]] = []


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
