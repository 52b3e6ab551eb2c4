"""Chain integrity: recomputing a thread's hash chain and its checkpoints' checksums, whether a
checkpoint is safe to restore, the verdict of a thread, and the threads and checkpoints that
need attention.

Everything here reads; recording a verdict on the thread (the integrity sweep) is a write and
lives with the services. Events are streamed from the database in chunks of plain values (no
model instances, one query per chunk), so a thread of any length verifies in bounded memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.db.models import (
    Exists,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Window,
)
from django.db.models.functions import RowNumber

from threads.domain import chain
from threads.domain.chain import ChainVerdict
from threads.domain.ledger import DUPLICATE_OF
from threads.keys.chain import ChainKeyUnknown, thread_genesis, thread_key
from threads.models import (
    TOOL_CALL_INDEXED,
    Checkpoint,
    Event,
    EventKind,
    SummaryPhase,
    SummaryVersion,
    Thread,
)
from threads.selectors.events import STORED_COLUMNS, event_range, stored_event
from threads.selectors.redactions import redaction_verdict, thread_redactions
from threads.selectors.threads import member_workspace_ids

CHUNK_SIZE = 2000
# Progress is reported every this many events: often enough for a bar, rarely enough to be free.
PROGRESS_EVERY = 5000
# The hash, and chain v2's salt and content digest (NULL, and left out, on a v1 event).
CHAIN_COLUMNS = ("hash", "content_salt", "content_digest")
EVENT_COLUMNS = (*STORED_COLUMNS, *CHAIN_COLUMNS)
# Safe-flagged checkpoints read per thread at once when looking for the last safe one: the
# newest usually passes, and a thread may hold thousands.
SAFE_CANDIDATES = 50

Progress = Callable[[int, int], None]


def stored_events(
    *, thread_id: Any, after: int = 0, until: int | None = None
) -> Iterator[dict[str, Any]]:
    """A thread's events in their stored form plus `hash` (and chain v2's `content_salt` and
    `content_digest` where the event has them), in seq order, streamed in chunks."""
    rows = event_range(thread_id=thread_id, after=after, until=until)
    for row in rows.values_list(*EVENT_COLUMNS).iterator(chunk_size=CHUNK_SIZE):
        yield stored_event(row, CHAIN_COLUMNS)


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
    key: bytes | None,
    progress: Progress | None = None,
) -> ChainVerdict:
    """Verify events (start_seq, until] from `start_hash` with the thread's chain `key`; a
    missing tail is a break too."""
    events = _with_progress(
        stored_events(thread_id=thread_id, after=start_seq, until=until),
        progress,
        until - start_seq,
    )
    records = redaction_verdict(thread_id=thread_id, key=key)
    verdict = chain.verify_chain(
        events, start_hash=start_hash, start_seq=start_seq, key=key, redactions=records.trusted
    )
    if verdict.ok and verdict.verified_until < until:
        # Rows at the end were deleted: the walk stopped early without a mismatch.
        missing = verdict.verified_until + 1
        verdict = ChainVerdict(
            False,
            verdict.verified_until,
            missing,
            verdict.head,
            f"seq {missing} is missing",
            verdict.redactions,
        )
    bad = records.first_bad_seq
    if (
        bad is not None
        and start_seq < bad <= until
        and (verdict.first_bad_seq is None or bad < verdict.first_bad_seq)
    ):
        # A redaction record that does not verify (changed, or forged without the chain key)
        # names its seq, even where the event itself still holds its content.
        before = (
            start_hash
            if bad - 1 == start_seq
            else Event.objects.filter(thread_id=thread_id, seq=bad - 1)
            .values_list("hash", flat=True)
            .first()
        )
        notes = tuple(n for n in verdict.redactions if int(n.split()[3]) < bad)
        return ChainVerdict(False, bad - 1, bad, before or "", records.detail, notes)
    return verdict


def checkpoint_fields_body(
    *,
    thread_id: Any,
    summary_version: int | None,
    cursor: int,
    chain_hash: str,
    summary_checksum: str,
    pending: Any,
) -> dict[str, Any]:
    """What a checkpoint's checksum covers, from its fields as read (`summary_version` is the
    version's number): for a caller that read them without building the model."""
    return {
        "thread": str(thread_id),
        "summary_version": summary_version,
        "cursor": cursor,
        "chain_hash": chain_hash,
        "summary_checksum": summary_checksum,
        "pending": pending,
    }


def checkpoint_body(checkpoint: Checkpoint) -> dict[str, Any]:
    """What a checkpoint's checksum covers: every field it stands on."""
    version = checkpoint.summary_version
    return checkpoint_fields_body(
        thread_id=checkpoint.thread_id,
        summary_version=version.version if version is not None else None,
        cursor=checkpoint.cursor,
        chain_hash=checkpoint.chain_hash,
        summary_checksum=checkpoint.summary_checksum,
        pending=checkpoint.pending,
    )


def checkpoint_checksum(checkpoint: Checkpoint) -> str:
    return chain.checksum(checkpoint_body(checkpoint), thread_key(checkpoint.thread))


def summary_checksum(version: SummaryVersion, thread: Thread | None = None) -> str:
    """docs/api.md, "Canonical forms and checksums": checksum of {schema_version, thread,
    covered_from, covered_until, chain_hash, summary}, with the thread's key (`thread` when the
    caller holds it)."""
    return chain.checksum(
        {
            "schema_version": version.content.get("schema_version", 1),
            "thread": str(version.thread_id),
            "covered_from": version.covered_from,
            "covered_until": version.covered_until,
            "chain_hash": version.chain_hash,
            "summary": version.content,
        },
        thread_key(thread or version.thread),
    )


def chain_hash_at(thread: Thread, seq: int) -> str | None:
    """The chain hash after event `seq` (the genesis hash at 0), or None if it is missing."""
    if seq == 0:
        return thread_genesis(thread.id, thread.chain_key_id)
    return Event.objects.filter(thread=thread, seq=seq).values_list("hash", flat=True).first()


def checkpoint_is_safe(checkpoint: Checkpoint) -> tuple[bool, str]:
    """Safe = its checksum recomputes, the chain up to its cursor verifies, and its summary
    passed verification (docs/repairs.md, "Checkpoints, rollback, fork"). Returns (safe, reason when
    not)."""
    return _checkpoint_safety(
        checkpoint, lambda: chain_hash_at(checkpoint.thread, checkpoint.cursor)
    )


def _checkpoint_safety(
    checkpoint: Checkpoint, hash_at_cursor: Callable[[], str | None]
) -> tuple[bool, str]:
    """checkpoint_is_safe, the chain hash at the cursor read by `hash_at_cursor` (only when
    the cheaper checks pass)."""
    try:
        return _checkpoint_safety_keyed(checkpoint, hash_at_cursor)
    except ChainKeyUnknown as unknown:
        return False, unknown.message


def _checkpoint_safety_keyed(
    checkpoint: Checkpoint, hash_at_cursor: Callable[[], str | None]
) -> tuple[bool, str]:
    if not checkpoint.safe:
        return False, checkpoint.unsafe_reason or "marked unsafe"
    if checkpoint.checksum != checkpoint_checksum(checkpoint):
        return False, "the checkpoint's checksum does not recompute"
    thread = checkpoint.thread
    cursor = checkpoint.cursor
    if thread.first_bad_seq is not None and thread.first_bad_seq <= cursor:
        return False, f"the chain breaks at seq {thread.first_bad_seq}, at or before the cursor"
    if hash_at_cursor() != checkpoint.chain_hash:
        return False, f"the chain hash at seq {cursor} differs from the checkpoint's"
    if thread.verified_until < cursor or not thread.verified_hash:
        verdict = chain_walk(
            thread_id=thread.pk,
            start_seq=0,
            start_hash=thread_genesis(thread.id, thread.chain_key_id),
            until=cursor,
            key=thread_key(thread),
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
        if version.checksum != summary_checksum(version, thread):
            return False, "the summary's checksum does not recompute"
    return True, ""


def last_safe_checkpoint(*, thread: Thread) -> Checkpoint | None:
    """The checkpoint with the highest cursor that is still safe, or None."""
    return last_safe_checkpoints(thread_ids={thread.pk}).get(thread.pk)


def last_safe_checkpoints(*, thread_ids: Iterable[Any]) -> dict[Any, Checkpoint]:
    """Per thread, the checkpoint with the highest cursor that is still safe (threads without
    one are absent).

    One query for any number of threads: the newest SAFE_CANDIDATES safe-flagged checkpoints
    of each, with the chain hash at their cursor, are judged by checkpoint_is_safe's rules
    (its chain walk only runs past what the last sweep verified). A thread whose candidates
    all fail reads its older ones one by one.
    """
    ids = set(thread_ids)
    if not ids:
        return {}
    candidates = (
        Checkpoint.objects.filter(thread_id__in=ids, safe=True)
        .select_related("summary_version", "thread")
        .annotate(
            rank=Window(
                RowNumber(),
                partition_by=[F("thread_id")],
                order_by=[F("cursor").desc(), F("pk").desc()],
            ),
            hash_at_cursor=Subquery(
                Event.objects.filter(thread=OuterRef("thread_id"), seq=OuterRef("cursor")).values(
                    "hash"
                )[:1]
            ),
        )
        .filter(rank__lte=SAFE_CANDIDATES)
        .order_by("thread_id", "-cursor", "-pk")
    )
    found: dict[Any, Checkpoint] = {}
    exhausted: set[Any] = set()
    for candidate in candidates:
        row: Any = candidate  # carries rank and hash_at_cursor
        if row.thread_id in found:
            continue
        if _checkpoint_safety(row, partial(_candidate_hash, row))[0]:
            found[row.thread_id] = row
        elif row.rank == SAFE_CANDIDATES:
            exhausted.add(row.thread_id)
    for thread_id in exhausted - set(found):
        older = (
            Checkpoint.objects.filter(thread_id=thread_id, safe=True)
            .select_related("summary_version", "thread")
            .order_by("-cursor", "-pk")[SAFE_CANDIDATES:]
        )
        for checkpoint in older.iterator(chunk_size=50):
            if checkpoint_is_safe(checkpoint)[0]:
                found[thread_id] = checkpoint
                break
    return found


def _candidate_hash(checkpoint: Any) -> str | None:
    if checkpoint.cursor == 0:
        return thread_genesis(checkpoint.thread_id, checkpoint.thread.chain_key_id)
    return checkpoint.hash_at_cursor


def threads_integrity_for_member(*, user: Any) -> QuerySet[Thread]:
    """Broken chains first, then the least recently verified."""
    return (
        Thread.objects.filter(workspace_id__in=member_workspace_ids(user))
        .select_related("workspace")
        .annotate(
            unsafe_checkpoints=Exists(Checkpoint.objects.filter(thread=OuterRef("pk"), safe=False))
        )
        .only(
            "id",
            "external_id",
            "title",
            "workspace__name",
            "chain_ok",
            "first_bad_seq",
            "verified_until",
            "verified_at",
            "fully_verified_at",
            "last_seq",
        )
        .order_by("chain_ok", F("verified_at").asc(nulls_first=True), "pk")
    )


def unsafe_checkpoints_for_member(*, user: Any) -> QuerySet[Checkpoint]:
    return (
        Checkpoint.objects.filter(thread__workspace_id__in=member_workspace_ids(user), safe=False)
        .select_related("thread")
        .only("id", "cursor", "unsafe_reason", "created_at", "thread__external_id", "thread__id")
        .order_by("-created_at")
    )


def threads_due_full_verify(*, now: datetime, period: timedelta, interval: timedelta) -> list[Any]:
    """The threads this sweep re-verifies from genesis: a bounded share, oldest first.

    The sweep runs every `interval` and every thread must be walked from genesis once per
    `period`, so each sweep takes ceil(threads × interval / period) of them — enough that
    over one period every thread gets its walk, and spread so no sweep does them all. Due are
    those never fully verified and those whose last full walk will be a period old before the
    next sweep; the longest unverified go first.
    """
    total = Thread.objects.count()
    share = math.ceil(total * (interval / period)) if period > timedelta(0) else total
    due = Thread.objects.filter(
        Q(fully_verified_at__isnull=True) | Q(fully_verified_at__lte=now - period + interval)
    ).order_by(F("fully_verified_at").asc(nulls_first=True), "pk")
    return list(due.values_list("pk", flat=True)[:share])


def integrity_verdict(*, thread: Thread, read_until: int) -> dict[str, Any]:
    """The chain verdict a resume path answers beside what it read (the working context, a
    checkpointer's restore; docs/api.md, "Working context — `GET /api/v1/threads/{id}/context/`" and
    "Read — `GET /api/v1/threads/{id}/langgraph/checkpoints/{checkpoint_id}/`"): the verdict the
    last integrity check recorded on the thread, and whether this read reaches past its break.

    No chain is walked here: a read stays one row's worth of work, and an edit is found by the
    sweep or a requested verify, after which every read says so. `verified_at` is null while no
    check has run (then `chain_ok` vouches for nothing). `reaches_break` is true when the
    chain broke at or before `read_until` (the last seq the read served); a broken verdict
    that names no seq reaches every read."""
    first_bad = thread.first_bad_seq
    return {
        "chain_ok": thread.chain_ok,
        "first_bad_seq": first_bad,
        "verified_until": thread.verified_until,
        "verified_at": thread.verified_at.isoformat() if thread.verified_at else None,
        "reaches_break": not thread.chain_ok and (first_bad is None or first_bad <= read_until),
    }


def thread_integrity(*, thread: Thread) -> dict[str, Any]:
    """The integrity answer (docs/api.md,
    "Integrity — `POST /api/v1/threads/{id}/verify/`, `GET /api/v1/threads/{id}/integrity/`"), from
    the verdict the last check recorded on the thread, as plain JSON values: the API answers it and
    the verify task stores it as its result.

    `last_safe_checkpoint` is the checkpoint a rollback can use: the highest cursor that is
    still safe (its checksum recomputes and the chain up to its cursor verifies).

    A thread no check has looked at yet says so: `verified` false, `status` "not_verified" and
    `chain_ok` null, never a `chain_ok: true` that nothing established. A broken verdict
    recorded without a walk (a chain key no longer configured) stays `chain_ok: false`."""
    checkpoint = last_safe_checkpoint(thread=thread)
    verified = thread.verified_at is not None
    chain_ok: bool | None = thread.chain_ok
    if not chain_ok:
        status = "broken"
    elif verified:
        status = "ok"
    else:
        status, chain_ok = "not_verified", None
    return {
        "status": status,
        "verified": verified,
        "chain_ok": chain_ok,
        "first_bad_seq": thread.first_bad_seq,
        "verified_until": thread.verified_until,
        "verified_at": thread.verified_at.isoformat() if thread.verified_at else None,
        "fully_verified_at": (
            thread.fully_verified_at.isoformat() if thread.fully_verified_at else None
        ),
        "last_seq": thread.last_seq,
        "last_safe_checkpoint": None
        if checkpoint is None
        else {
            "id": checkpoint.pk,
            "summary_version": (
                checkpoint.summary_version.version if checkpoint.summary_version else None
            ),
            "cursor": checkpoint.cursor,
            "chain_hash": checkpoint.chain_hash,
            "summary_checksum": checkpoint.summary_checksum,
            "safe": checkpoint.safe,
            "created_at": checkpoint.created_at.isoformat(),
            "label": checkpoint.label,
        },
        # The redactions the last check walked past: "redacted at seq N", and by whom and why.
        "redactions": [
            {"seq": r.seq, "by": r.by_label, "at": r.at.isoformat(), "reason": r.reason}
            for r in thread_redactions(thread_id=thread.pk)
            if chain_ok and r.seq <= thread.verified_until
        ],
    }


def thread_heads() -> Iterator[Mapping[str, Any]]:
    """Every thread's log head as the database records it, for a publication of heads:
    `id`, `workspace__name`, `last_seq`, `chain_head`, `chain_key_id` (threads with events)."""
    return (
        Thread.objects.filter(last_seq__gt=0)
        .values("id", "workspace__name", "last_seq", "chain_head", "chain_key_id")
        .order_by("pk")
        .iterator(chunk_size=500)
    )


def stored_hashes(*, thread_id: Any, seqs: Iterable[int]) -> dict[int, str]:
    """The stored chain hash at each of these seqs (missing seqs are absent)."""
    wanted = sorted(set(seqs))
    found: dict[int, str] = {}
    for start in range(0, len(wanted), 1000):
        rows = Event.objects.filter(thread_id=thread_id, seq__in=wanted[start : start + 1000])
        found.update(rows.values_list("seq", "hash"))
    return found


def second_results_for_member(*, user: Any) -> QuerySet[Event]:
    """Tool results stored for a call that already had one (flagged DUPLICATE_OF by the
    append, docs/event-log.md, "Idempotency and binding"), newest first: a contradiction a person
    should look at."""
    return (
        Event.objects.filter(
            TOOL_CALL_INDEXED,
            thread__workspace_id__in=member_workspace_ids(user),
            kind=EventKind.TOOL_RESULT,
            data__has_key=DUPLICATE_OF,
        )
        .select_related("thread")
        .only("id", "seq", "tool_call_id", "created_at", "data", "thread__external_id")
        .order_by("-created_at", "-pk")
    )
