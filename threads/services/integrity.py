"""The integrity sweep (DESIGN §6): recompute a thread's hash chain, name the first bad seq,
mark checkpoints at or after it unsafe, and say whether a checkpoint is safe to restore.

Events are streamed from the database in chunks of plain values (no model instances, one
query per chunk), so a thread of any length verifies in bounded memory. A full check on request
(`integrity_verify_request`) runs as the `ctxadmin.verify_thread` task.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from django.db import transaction
from django.utils import timezone

from threads.chainkey import chain_key, thread_genesis
from threads.domain import chain
from threads.domain.chain import ChainVerdict
from threads.domain.events import stored_form
from threads.models import Checkpoint, Event, SummaryPhase, SummaryVersion, TaskRun, Thread
from threads.services.audit import audit_record
from threads.services.enqueue import VERIFY_THREAD, task_run_enqueue

CHUNK_SIZE = 2000
# Progress is reported every this many events: often enough for a bar, rarely enough to be free.
PROGRESS_EVERY = 5000
EVENT_COLUMNS = ("seq", "kind", "created_at", "client_event_id", "metadata", "data", "hash")

Progress = Callable[[int, int], None]


def stored_events(
    *, thread_id: Any, after: int = 0, until: int | None = None
) -> Iterator[dict[str, Any]]:
    """A thread's events in their stored form plus `hash`, in seq order, streamed in chunks."""
    rows = Event.objects.filter(thread_id=thread_id, seq__gt=after)
    if until is not None:
        rows = rows.filter(seq__lte=until)
    for seq, kind, created_at, client_event_id, metadata, data, hash_ in (
        rows.order_by("seq").values_list(*EVENT_COLUMNS).iterator(chunk_size=CHUNK_SIZE)
    ):
        event = stored_form(
            seq=seq,
            kind=kind,
            created_at=created_at,
            client_event_id=client_event_id,
            metadata=metadata,
            data=data,
        )
        event["hash"] = hash_
        yield event


def _with_progress(
    events: Iterator[dict[str, Any]], progress: Progress | None, total: int
) -> Iterator[dict[str, Any]]:
    if progress is None:
        yield from events
        return
    done = 0
    for event in events:
        yield event
        done += 1
        if done % PROGRESS_EVERY == 0:
            progress(done, total)
    progress(done, total)


def chain_walk(
    *,
    thread_id: Any,
    start_seq: int,
    start_hash: str,
    until: int,
    progress: Progress | None = None,
) -> ChainVerdict:
    """Verify events (start_seq, until] from `start_hash`; a missing tail is a break too."""
    events = _with_progress(
        stored_events(thread_id=thread_id, after=start_seq, until=until),
        progress,
        until - start_seq,
    )
    verdict = chain.verify_chain(
        events, start_hash=start_hash, start_seq=start_seq, key=chain_key()
    )
    if verdict.ok and verdict.verified_until < until:
        # Rows at the end were deleted: the walk stopped early without a mismatch.
        missing = verdict.verified_until + 1
        return ChainVerdict(
            False, verdict.verified_until, missing, verdict.head, f"seq {missing} is missing"
        )
    return verdict


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
    `full`. On a break, every checkpoint with cursor >= first_bad_seq is marked unsafe.
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
    _record(thread, verdict)
    return verdict


def _record(thread: Thread, verdict: ChainVerdict) -> None:
    now = timezone.now()
    fields = {
        "chain_ok": verdict.ok,
        "first_bad_seq": verdict.first_bad_seq,
        "verified_until": verdict.verified_until,
        "verified_hash": verdict.head,
        "verified_at": now,
    }
    with transaction.atomic(durable=True):
        Thread.objects.filter(pk=thread.pk).update(**fields)
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


def checkpoint_body(checkpoint: Checkpoint) -> dict[str, Any]:
    """What a checkpoint's checksum covers: every field it stands on."""
    version = checkpoint.summary_version
    return {
        "thread": str(checkpoint.thread_id),
        "summary_version": version.version if version is not None else None,
        "cursor": checkpoint.cursor,
        "chain_hash": checkpoint.chain_hash,
        "summary_checksum": checkpoint.summary_checksum,
        "pending": checkpoint.pending,
    }


def checkpoint_checksum(checkpoint: Checkpoint) -> str:
    return chain.checksum(checkpoint_body(checkpoint), chain_key())


def summary_checksum(version: SummaryVersion) -> str:
    """CONTRACT: checksum of {schema_version, thread, covered_from, covered_until, chain_hash,
    summary}."""
    return chain.checksum(
        {
            "schema_version": version.content.get("schema_version", 1),
            "thread": str(version.thread_id),
            "covered_from": version.covered_from,
            "covered_until": version.covered_until,
            "chain_hash": version.chain_hash,
            "summary": version.content,
        },
        chain_key(),
    )


def chain_hash_at(thread: Thread, seq: int) -> str | None:
    """The chain hash after event `seq` (the genesis hash at 0), or None if it is missing."""
    if seq == 0:
        return thread_genesis(thread.id)
    return Event.objects.filter(thread=thread, seq=seq).values_list("hash", flat=True).first()


def checkpoint_is_safe(checkpoint: Checkpoint) -> tuple[bool, str]:
    """Safe = its checksum recomputes, the chain up to its cursor verifies, and its summary
    passed verification (DESIGN §6). Returns (safe, reason when not)."""
    if not checkpoint.safe:
        return False, checkpoint.unsafe_reason or "marked unsafe"
    if checkpoint.checksum != checkpoint_checksum(checkpoint):
        return False, "the checkpoint's checksum does not recompute"
    thread = checkpoint.thread
    cursor = checkpoint.cursor
    if thread.first_bad_seq is not None and thread.first_bad_seq <= cursor:
        return False, f"the chain breaks at seq {thread.first_bad_seq}, at or before the cursor"
    if chain_hash_at(thread, cursor) != checkpoint.chain_hash:
        return False, f"the chain hash at seq {cursor} differs from the checkpoint's"
    if thread.verified_until < cursor or not thread.verified_hash:
        verdict = chain_walk(
            thread_id=thread.pk,
            start_seq=0,
            start_hash=thread_genesis(thread.id),
            until=cursor,
        )
        if not verdict.ok:
            return False, f"the chain breaks at seq {verdict.first_bad_seq}: {verdict.detail}"
    version = checkpoint.summary_version
    if version is not None:
        if version.phase in (SummaryPhase.PREPARED, SummaryPhase.REJECTED, SummaryPhase.DISCARDED):
            return False, f"its summary version {version.version} is {version.phase}"
        if not (version.verification or {}).get("ok"):
            return False, f"its summary version {version.version} did not pass verification"
        if version.checksum != checkpoint.summary_checksum:
            return False, "the summary's checksum differs from the checkpoint's"
        if version.checksum != summary_checksum(version):
            return False, "the summary's checksum does not recompute"
    return True, ""


def last_safe_checkpoint(*, thread: Thread) -> Checkpoint | None:
    """The checkpoint with the highest cursor that is still safe, or None."""
    candidates = (
        Checkpoint.objects.filter(thread=thread, safe=True)
        .select_related("summary_version", "thread")
        .order_by("-cursor", "-pk")
    )
    for checkpoint in candidates.iterator(chunk_size=50):
        if checkpoint_is_safe(checkpoint)[0]:
            return checkpoint
    return None
