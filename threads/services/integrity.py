"""The integrity sweep (docs/design.md §6): recompute a thread's hash chain, name the first bad seq,
record the verdict on the thread and mark checkpoints at or after it unsafe.

The walk itself, the checksums and whether a checkpoint is safe to restore are reads
(threads.selectors.integrity). A full check on request (`integrity_verify_request`) runs as
the `ctxadmin.verify_thread` task.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from threads.domain.chain import ChainVerdict
from threads.domain.heads import heads_check
from threads.keys.chain import ChainKeyUnknown, thread_genesis, thread_key
from threads.models import Checkpoint, TaskRun, Thread
from threads.selectors.integrity import (
    Progress,
    chain_hash_at,
    chain_walk,
    checkpoint_checksum,
    checkpoint_is_safe,
    last_safe_checkpoint,
    stored_events,
    stored_hashes,
    summary_checksum,
)
from threads.selectors.published_heads import thread_published_heads
from threads.services.audit import audit_record
from threads.services.enqueue import VERIFY_THREAD, task_run_enqueue
from threads.services.metrics import VERIFY_RUNS, metric_add

# The reads (chain walks, checksums, checkpoint safety) are selectors; the names stay
# importable here for the services that write checksums and re-check checkpoints.
__all__ = [
    "chain_hash_at",
    "chain_walk",
    "checkpoint_checksum",
    "checkpoint_is_safe",
    "integrity_check",
    "integrity_verify_request",
    "last_safe_checkpoint",
    "stored_events",
    "summary_checksum",
]


def integrity_verify_request(
    *, thread: Thread, actor: Any = None, actor_label: str = ""
) -> TaskRun:
    """Queue a full recomputation of the thread's chain (the verify task) and audit the
    request, in one transaction; the task is sent after it commits. `actor` is the person, or
    None for an agent named by `actor_label`."""
    with transaction.atomic(durable=True):
        run = task_run_enqueue(
            workspace=thread.workspace,
            thread=thread,
            kind="verify",
            task_name=VERIFY_THREAD,
            args=(str(thread.pk),),
        )
        audit_record(
            workspace=thread.workspace,
            actor=actor,
            actor_label=actor_label,
            action="verify_requested",
            target_type="thread",
            target_id=thread.pk,
            thread=thread,
            after={"task_id": run.id},
        )
    return run


def _start_point(thread: Thread, *, full: bool, last_seq: int) -> tuple[int, str]:
    """Where an incremental check may start: the furthest point already vouched for."""
    genesis = thread_genesis(thread.id, thread.chain_key_id)
    if full:
        return 0, genesis
    start: tuple[int, str] = (0, genesis)
    if thread.verified_hash and 0 < thread.verified_until <= last_seq:
        start = (thread.verified_until, thread.verified_hash)
    checkpoint = (
        Checkpoint.objects.filter(
            thread=thread, safe=True, cursor__gt=start[0], cursor__lte=last_seq
        )
        .select_related("summary_version", "thread")
        .order_by("-cursor")
        .first()
    )
    # A checkpoint's chain hash is trusted only while its own checksum recomputes.
    if checkpoint is not None and checkpoint.checksum == checkpoint_checksum(checkpoint):
        start = (checkpoint.cursor, checkpoint.chain_hash)
    return start


def integrity_check(
    *, thread: Thread, full: bool = False, progress: Progress | None = None
) -> ChainVerdict:
    """Recompute a thread's chain, hold it against the heads published outside the database,
    and record the verdict on the thread.

    Incremental from thread.verified_until/verified_hash (or the last safe checkpoint) unless
    `full`; a walk that starts at genesis (full, or nothing vouched for yet) records
    fully_verified_at. On a break, every checkpoint with cursor >= first_bad_seq is marked unsafe.
    Checks the log up to the thread's head as read at the start; later appends are left to
    the next check. A chain whose key is no longer configured is a failed check that names
    the key, and leaves the checkpoints alone: putting the key back makes it verify again.
    """
    head = Thread.objects.values("last_seq", "chain_head").get(pk=thread.pk)
    last_seq, chain_head = head["last_seq"], head["chain_head"]
    try:
        key = thread_key(thread)
    except ChainKeyUnknown as unknown:
        verdict = ChainVerdict(False, 0, 1, "", unknown.message)
        _record(thread, verdict, from_genesis=False, mark_checkpoints=False)
        return verdict
    start_seq, start_hash = _start_point(thread, full=full, last_seq=last_seq)
    verdict = chain_walk(
        thread_id=thread.pk,
        start_seq=start_seq,
        start_hash=start_hash,
        until=last_seq,
        key=key,
        progress=progress,
    )
    if verdict.ok and verdict.head != chain_head:
        # Every event verifies but the thread's recorded head disagrees: the thread row was
        # altered, or its last event was replaced along with a forged chain without the key.
        verdict = ChainVerdict(
            False,
            max(last_seq - 1, 0),
            last_seq,
            verdict.head,
            "the thread's chain head does not match its last event",
        )
    if verdict.ok:
        verdict = _against_published(thread, verdict, last_seq=last_seq, full=full)
    _record(thread, verdict, from_genesis=start_seq == 0)
    return verdict


def _against_published(
    thread: Thread, verdict: ChainVerdict, *, last_seq: int, full: bool
) -> ChainVerdict:
    """A log whose chain verifies must still contain every head published for it
    (docs/design.md §6.6): that catches a truncated tail with the thread row set back, and a
    chain recomputed without the key. A full check holds it against every published head, an
    incremental one against the latest only; a heads line whose signature fails is a break."""
    heads, problems = thread_published_heads(thread_id=thread.pk)
    genesis = thread_genesis(thread.id, thread.chain_key_id)
    if problems:
        # Someone edited the heads file: nothing is vouched for until it is looked at.
        where, claimed, reason = problems[0]
        return ChainVerdict(
            False,
            0,
            min(claimed, last_seq + 1),
            genesis,
            f"the published head at {where} (seq {claimed}) is not to be trusted: {reason}",
        )
    if not full:
        heads = heads[-1:]
    if not heads:
        return verdict
    hashes = stored_hashes(thread_id=thread.pk, seqs=[h.seq for h in heads if h.seq <= last_seq])
    checked = heads_check(heads, last_seq=last_seq, stored_hashes=hashes)
    if checked.ok:
        return verdict
    # The pair an incremental check may resume from: the last seq still vouched for.
    until = checked.verified_until
    resume = verdict.head if until == last_seq else hashes.get(until, genesis)
    return ChainVerdict(False, until, checked.first_bad_seq, resume, checked.detail)


def _record(
    thread: Thread, verdict: ChainVerdict, *, from_genesis: bool, mark_checkpoints: bool = True
) -> None:
    now = timezone.now()
    fields: dict[str, Any] = {
        "chain_ok": verdict.ok,
        "first_bad_seq": verdict.first_bad_seq,
        "verified_until": verdict.verified_until,
        "verified_hash": verdict.head,
        "verified_at": now,
    }
    if from_genesis:
        # A walk from genesis re-read every stored event, the verified ones included.
        fields["fully_verified_at"] = now
    with transaction.atomic(durable=True):
        Thread.objects.filter(pk=thread.pk).update(**fields)
        metric_add([(VERIFY_RUNS, "", 1)], thread_id=thread.pk)
        if verdict.first_bad_seq is not None and mark_checkpoints:
            reason = f"the chain breaks at seq {verdict.first_bad_seq}: {verdict.detail}"[:300]
            marked = list(
                Checkpoint.objects.filter(
                    thread=thread, cursor__gte=verdict.first_bad_seq, safe=True
                ).values_list("pk", flat=True)
            )
            Checkpoint.objects.filter(pk__in=marked).update(safe=False, unsafe_reason=reason)
            if thread.first_bad_seq != verdict.first_bad_seq or marked:
                audit_record(
                    workspace=thread.workspace,
                    actor=None,
                    action="chain_break_detected",
                    target_type="thread",
                    target_id=thread.pk,
                    thread=thread,
                    before={"chain_ok": thread.chain_ok, "first_bad_seq": thread.first_bad_seq},
                    after={
                        "first_bad_seq": verdict.first_bad_seq,
                        "detail": verdict.detail,
                        "checkpoints_marked_unsafe": marked,
                    },
                    actor_label="integrity sweep",
                )
    for name, value in fields.items():
        setattr(thread, name, value)
