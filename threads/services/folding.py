"""The fold pipeline (DESIGN §5): prepare → verify → commit by compare-and-swap.

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

Events appended during a fold are after R, so they stay in the working context and the next
fold picks them up: never lost, never counted twice. A worker that dies between prepare and
commit leaves a `prepared` row that `recover_prepared` re-verifies and commits (when the head
is still the one it was built on) or discards.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from threads.domain import chain, tokens
from threads.domain.budget import Budget, fold_target
from threads.domain.summary_render import render_summary
from threads.domain.units import last_closed_boundary, split_units
from threads.domain.verify import Check, Verification, verify_candidate
from threads.models import (
    ApprovalRequest,
    Checkpoint,
    Event,
    EventKind,
    SideEffect,
    SummaryPhase,
    SummaryVersion,
    TaskRun,
    TaskState,
    Thread,
)
from threads.selectors import event_dicts
from threads.services.audit import audit_record
from threads.services.chainkey import chain_key
from threads.services.integrity import checkpoint_checksum, summary_checksum
from threads.services.tasks import task_run_finish, task_run_start
from threads.summarizers import get_summarizer

logger = logging.getLogger(__name__)

TRIGGER_KINDS = ("capacity", "structural", "risk", "manual", "rollback")
# One fold reads at most this many events after the head, so a process folding a long backlog
# (an imported 100k-event trace) stays in bounded memory; the rest folds in the next versions.
FOLD_MAX_EVENTS = int(getattr(settings, "CTXADMIN_FOLD_MAX_EVENTS", 20000))
# Test hook: the fold task sleeps this many seconds between prepare and commit, so a test can
# kill the worker at exactly that moment. Inactive unless the variable is set.
PAUSE_AFTER_PREPARE_ENV = "CTXADMIN_TEST_PAUSE_AFTER_PREPARE"


class Outcome:
    COMMITTED = "committed"
    REJECTED = "rejected"
    DISCARDED = "discarded"  # the head moved: another fold or a rollback won
    ALREADY_DECIDED = "already_decided"  # someone (recovery, a redelivery) got there first


@dataclass
class FoldResult:
    version: SummaryVersion | None  # None: nothing new to fold
    outcome: str  # an Outcome, or "noop"


def _now() -> Any:
    return timezone.now()


def _genesis(thread_id: Any) -> str:
    return chain.genesis_hash(str(thread_id), chain_key())


# --- requests: at most one fold in flight per thread -------------------------------------------


def fold_request(*, thread: Thread, trigger: dict[str, Any], actor: Any = None) -> TaskRun:
    """Ask for a fold of `thread`; the Celery task is sent after commit.

    At most one fold is in flight per thread: under the thread's row lock, a queued or running
    fold (thread.fold_task_id) answers for this request too, unless it is older than
    CTXADMIN_PREPARED_TIMEOUT (its worker died), in which case it is replaced. Not durable on
    purpose: services that fold after their own change (a rollback) call it inside their
    transaction, and the task is still sent only once that commits.
    """
    from threads.tasks import fold_thread_task  # tasks import services, not the reverse

    if trigger.get("kind") not in TRIGGER_KINDS:
        raise ValueError(f"unknown trigger kind {trigger.get('kind')!r}")
    now = _now()
    with transaction.atomic():
        locked = Thread.objects.select_for_update().select_related("workspace").get(pk=thread.pk)
        if locked.fold_task_id:
            fresh = (
                locked.fold_requested_at is not None
                and now - locked.fold_requested_at < settings.CTXADMIN_PREPARED_TIMEOUT
            )
            existing = TaskRun.objects.filter(pk=locked.fold_task_id).first()
            if (
                fresh
                and existing is not None
                and existing.state in (TaskState.PENDING, TaskState.STARTED, TaskState.PROGRESS)
            ):
                return existing
        thread_id = str(locked.pk)
        run = task_run_start(
            workspace=locked.workspace,
            thread=locked,
            kind="fold",
            send=lambda task_id: fold_thread_task.apply_async(
                (thread_id, trigger), task_id=task_id
            ),
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
            "reserved_output",
            "reasoning_reserve",
            "safety_margin",
            "low_watermark",
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
    nothing new to fold. Takes the thread's row lock (select_for_update) only to number the
    version; the fold itself runs on an unlocked read of an immutable prefix of the log."""
    head = _head(thread_id)
    base_version, covered = head["head_version"], head["covered_until"]
    base = _base_version(thread_id, base_version)
    read_until = min(head["last_seq"], covered + FOLD_MAX_EVENTS)
    events = event_dicts_for_fold(thread_id, after=covered, until=read_until)
    budget = Budget(
        window=head["context_window"],
        fixed=head["fixed_tokens"],
        reserved_output=head["reserved_output"],
        reasoning_reserve=head["reasoning_reserve"],
        safety_margin=head["safety_margin"],
    )
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
    summarizer = get_summarizer(head["summarizer"])
    content = summarizer.fold(
        previous=base.content if base is not None else None,
        events=folded,
        covered_from=covered + 1,
        covered_until=boundary,
    )
    rendered = render_summary(content)
    candidate = SummaryVersion(
        thread_id=thread_id,
        base_version=base_version,
        phase=SummaryPhase.PREPARED,
        covered_from=covered + 1,
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
        candidate.version = locked.last_version + 1
        Thread.objects.filter(pk=thread_id).update(last_version=candidate.version)
        candidate.save(force_insert=True)
    return candidate


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
    events = event_dicts_for_fold(version.thread_id, after=covered, until=version.covered_until)
    start_hash = base.chain_hash if base is not None else _genesis(version.thread_id)
    verdict = chain.verify_chain(events, start_hash=start_hash, start_seq=covered, key=chain_key())
    if verdict.ok and verdict.verified_until == version.covered_until:
        expected = verdict.head
    else:
        bad = verdict.first_bad_seq or verdict.verified_until + 1
        expected = f"chain broken at seq {bad}: {verdict.detail or 'missing events'}"
    result = verify_candidate(
        candidate=version.content,
        previous=base.content if base is not None else None,
        events=events,
        base_covered_until=covered,
        boundary=version.covered_until,
        chain_hash_at_boundary=version.chain_hash,
        expected_chain_hash=expected,
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
    result.ok = result.ok and checksum_ok
    return result


# --- phase 3: commit ----------------------------------------------------------------------------


def summary_commit(
    *, version: SummaryVersion, verification: Verification, actor_label: str = "fold"
) -> str:
    """Decide a prepared candidate in one transaction; return an Outcome.

    Claims the row (prepared → committed only if still prepared, so a redelivered task and
    the recovery sweep cannot both decide it), then compare-and-swaps the thread head. Zero
    rows swapped: the head moved since the candidate was built, so it is discarded in the
    same transaction and the winner stays untouched.
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
            pk=version.thread_id, head_version=version.base_version
        ).update(head_version=version.version, covered_until=version.covered_until, updated_at=now)
        if not swapped:
            SummaryVersion.objects.filter(pk=version.pk).update(phase=SummaryPhase.DISCARDED)
            version.phase = SummaryPhase.DISCARDED
            audit_record(
                workspace=thread.workspace,
                actor=None,
                action="summary_discarded",
                target_type="summary_version",
                target_id=version.version,
                thread=thread,
                before={"base_version": version.base_version},
                after={"head_version": thread.head_version},
                actor_label=actor_label,
            )
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


PENDING_EVENT_KINDS = (
    EventKind.TOOL_CALL,
    EventKind.TOOL_RESULT,
    EventKind.SIDE_EFFECT_RESOLUTION,
    EventKind.APPROVAL_REQUEST,
    EventKind.APPROVAL_DECISION,
)


def _pending_start(thread: Thread, cursor: int) -> tuple[int, list[dict[str, Any]]]:
    """The nearest checkpoint at or before `cursor` whose checksum still recomputes: its
    pending list is what was open at its cursor, so only the events after it need reading."""
    checkpoint = (
        Checkpoint.objects.filter(thread=thread, cursor__lte=cursor, safe=True)
        .select_related("summary_version")
        .order_by("-cursor", "-pk")
        .first()
    )
    if checkpoint is None or checkpoint.checksum != checkpoint_checksum(checkpoint):
        return 0, []
    return checkpoint.cursor, list(checkpoint.pending)


def pending_at(
    *, thread: Thread, cursor: int, from_checkpoint: bool = True
) -> list[dict[str, Any]]:
    """Side effects and approvals still open at `cursor`, as the log stood then.

    A side effect is open while its call has no result (running) or only a timeout (unknown)
    and no resolution; an approval while its request has no decision. Starts from the nearest
    trusted checkpoint and replays only the events after it (a few key columns of the kinds
    that matter), so a commit costs the same at seq 1,000 and at seq 100,000.
    """
    start, inherited = _pending_start(thread, cursor) if from_checkpoint else (0, [])
    effects = {p["call_seq"]: dict(p) for p in inherited if p["kind"] == "side_effect"}
    approvals = {p["request_seq"]: dict(p) for p in inherited if p["kind"] == "approval"}
    new_calls: dict[int, int] = {}  # event id -> call seq
    new_requests: dict[int, int] = {}  # event id -> request seq
    rows = (
        Event.objects.filter(
            thread=thread, seq__gt=start, seq__lte=cursor, kind__in=PENDING_EVENT_KINDS
        )
        .order_by("seq")
        .values_list(
            "id",
            "seq",
            "kind",
            "data__side_effect",
            "data__call_seq",
            "data__status",
            "data__approval_seq",
        )
    )
    for event_id, seq, kind, side_effect, call_seq, status, approval_seq in rows:
        if kind == EventKind.TOOL_CALL and side_effect:
            effects[seq] = {"kind": "side_effect", "call_seq": seq, "status": "running"}
            new_calls[event_id] = seq
        elif kind == EventKind.TOOL_RESULT and call_seq in effects:
            if status == "timeout":
                effects[call_seq]["status"] = "unknown"  # never "failed": nobody knows
            else:
                effects.pop(call_seq)
        elif kind == EventKind.SIDE_EFFECT_RESOLUTION:
            effects.pop(call_seq, None)
        elif kind == EventKind.APPROVAL_REQUEST:
            approvals[seq] = {"kind": "approval", "request_seq": seq}
            new_requests[event_id] = seq
        elif kind == EventKind.APPROVAL_DECISION:
            approvals.pop(approval_seq, None)
    wanted = [i for i, s in new_calls.items() if s in effects]
    for effect in SideEffect.objects.filter(call_event_id__in=wanted).values(
        "id", "tool_call_id", "tool_name", "idempotency_key", "call_seq"
    ):
        effects[effect["call_seq"]].update(effect)
    wanted = [i for i, s in new_requests.items() if s in approvals]
    for approval in ApprovalRequest.objects.filter(request_event_id__in=wanted).values(
        "id", "action", "request_event__seq"
    ):
        approvals[approval["request_event__seq"]].update(
            id=approval["id"], action=approval["action"]
        )
    ordered = [effects[s] for s in sorted(effects)] + [approvals[s] for s in sorted(approvals)]
    # One key order for every entry, whichever way it was built (the checksum covers it).
    return [dict(sorted(entry.items())) for entry in ordered]


def checkpoint_record(
    *,
    thread: Thread,
    version: SummaryVersion | None,
    cursor: int,
    chain_hash: str,
    summary_checksum: str,
    label: str = "",
    created_by: Any = None,
) -> Checkpoint:
    """Create a checkpoint: references and hashes, the work open at its cursor, and a checksum
    over all of it (threads.services.integrity.checkpoint_body). Runs inside the caller's
    transaction: every committed version gets one, in the same transaction as its commit."""
    checkpoint = Checkpoint(
        thread=thread,
        summary_version=version,
        cursor=cursor,
        chain_hash=chain_hash,
        summary_checksum=summary_checksum,
        pending=pending_at(thread=thread, cursor=cursor),
        label=label[:200],
        created_by=created_by,
    )
    checkpoint.checksum = checkpoint_checksum(checkpoint)
    checkpoint.save(force_insert=True)
    return checkpoint


# --- the whole pipeline -------------------------------------------------------------------------


def _pause_after_prepare() -> None:
    seconds = os.environ.get(PAUSE_AFTER_PREPARE_ENV)
    if seconds:
        time.sleep(float(seconds))


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
        _pause_after_prepare()
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
    version = result.version
    if version is None:
        return
    thread = Thread.objects.get(pk=thread_id)
    if result.outcome == Outcome.REJECTED:
        # Risk trigger "a failed verification": one retry (an llm backend may do better), never
        # a loop — a retry that fails again stays rejected and waits for people.
        if not trigger.get("retry_of"):
            failed = [c["name"] for c in version.verification["checks"] if not c["ok"]]
            fold_request(
                thread=thread,
                trigger={
                    "kind": "risk",
                    "retry_of": version.version,
                    "reason": f"verification of v{version.version} failed: {', '.join(failed)}",
                },
            )
        return
    if result.outcome != Outcome.COMMITTED:
        return
    # A capped fold (see FOLD_MAX_EVENTS) leaves the rest of a long backlog: the same trigger
    # carries on with it.
    if thread.last_seq - (version.covered_from - 1) > FOLD_MAX_EVENTS:
        reason = str(trigger.get("reason", "")).split(" (continued")[0]
        fold_request(
            thread=thread,
            trigger={
                **trigger,
                "reason": f"{reason} (continued: {thread.last_seq - thread.covered_until} "
                f"events after covered_until {thread.covered_until})",
            },
        )
        return
    _refold_if_triggered(thread)


def _refold_if_triggered(thread: Thread) -> None:
    """Triggers raised by events that arrived while this fold ran were answered by the fold
    in flight, which stopped before them: look at them again now, and fold them if they
    call for it and something after the new head may be folded."""
    from threads.services.triggers import capacity_trigger, choose_trigger, event_triggers

    if thread.last_seq <= thread.covered_until:
        return
    tail = event_dicts_for_fold(thread.pk, after=thread.covered_until, until=thread.last_seq)
    if last_closed_boundary(split_units(tail), after=thread.covered_until) <= thread.covered_until:
        return
    reasons = event_triggers(thread=thread, events=tail)
    capacity = capacity_trigger(thread=thread)
    if capacity is not None:
        reasons.append(capacity)
    trigger = choose_trigger(reasons)
    if trigger is not None:
        fold_request(thread=thread, trigger=trigger)


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
    # In-flight markers whose worker died before preparing anything.
    expired = _now() - settings.CTXADMIN_PREPARED_TIMEOUT
    Thread.objects.filter(fold_requested_at__lt=expired).exclude(fold_task_id="").update(
        fold_task_id="", fold_requested_at=None
    )
    return decided


def _discard(version: SummaryVersion, *, reason: str) -> str:
    with transaction.atomic(durable=True):
        changed = SummaryVersion.objects.filter(pk=version.pk, phase=SummaryPhase.PREPARED).update(
            phase=SummaryPhase.DISCARDED, decided_at=_now()
        )
        if not changed:
            return Outcome.ALREADY_DECIDED
        thread = Thread.objects.select_related("workspace").get(pk=version.thread_id)
        audit_record(
            workspace=thread.workspace,
            actor=None,
            action="summary_discarded",
            target_type="summary_version",
            target_id=version.version,
            thread=thread,
            before={"base_version": version.base_version},
            after={"reason": reason},
            actor_label="recovery",
        )
    version.phase = SummaryPhase.DISCARDED
    return Outcome.DISCARDED
