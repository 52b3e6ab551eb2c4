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

from threads.chainkey import thread_genesis
from threads.domain.chain import ChainVerdict
from threads.models import Checkpoint, TaskRun, Thread
from threads.selectors.integrity import (
    Progress,
    chain_hash_at,
    chain_walk,
    checkpoint_checksum,
    checkpoint_is_safe,
    last_safe_checkpoint,
    stored_events,
    summary_checksum,
)
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
    genesis = thread_genesis(thread.id)
    if full:
        return 0, genesis
    start: tuple[int, str] = (0, genesis)
    if thread.verified_hash and 0 < thread.verified_until <= last_seq:
        start = (thread.verified_until, thread.verified_hash)
    checkpoint = (
        Checkpoint.objects.filter(
            thread=thread, safe=True, cursor__gt=start[0], cursor__lte=last_seq
        )
        .select_related("summary_version")
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
    """Recompute a thread's chain and record the verdict on the thread.

    Incremental from thread.verified_until/verified_hash (or the last safe checkpoint) unless
    `full`; a walk that starts at genesis (full, or nothing vouched for yet) records
    fully_verified_at. On a break, every checkpoint with cursor >= first_bad_seq is marked unsafe.
    Checks the log up to the thread's head as read at the start; later appends are left to
    the next check.
    """
    head = Thread.objects.values("last_seq", "chain_head").get(pk=thread.pk)
    last_seq, chain_head = head["last_seq"], head["chain_head"]
    start_seq, start_hash = _start_point(thread, full=full, last_seq=last_seq)
    verdict = chain_walk(
        thread_id=thread.pk,
        start_seq=start_seq,
        start_hash=start_hash,
        until=last_seq,
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
    _record(thread, verdict, from_genesis=start_seq == 0)
    return verdict


def _record(thread: Thread, verdict: ChainVerdict, *, from_genesis: bool) -> None:
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
        if verdict.first_bad_seq is not None:
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
