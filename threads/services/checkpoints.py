"""Checkpoints (docs/design.md §6): writing them, and trusting them before a restore.

A checkpoint stores references and hashes, never copies: the summary version it stands on, the
cursor (events 1..cursor), the chain hash at the cursor, the summary's checksum and the work
that was pending at the cursor, plus a checksum over all of these. Every checkpoint is written
by `checkpoint_record` (the fold's commit, rollback, fork and on-demand checkpoints), whose
checksum is integrity.checkpoint_checksum, the function the integrity sweep recomputes.
Rollback (threads.services.rollback) and fork (threads.services.fork) trust a checkpoint only
after re-checking it (`checkpoint_require_safe`), never on its stored `safe` flag alone.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from django.db import connections, router, transaction

from threads.access import require_role
from threads.domain import chain
from threads.domain.errors import Conflict, NotFound
from threads.domain.ledger import OpenWork
from threads.keys.chain import thread_genesis, thread_key
from threads.models import (
    ApprovalRequest,
    Checkpoint,
    Event,
    EventKind,
    Role,
    SideEffect,
    SummaryPhase,
    SummaryVersion,
    Thread,
)
from threads.selectors.checkpoints import checkpoint_as_audit, summary_versions_replaced
from threads.selectors.integrity import checkpoint_fields_body
from threads.selectors.statements import rows_read
from threads.services.audit import audit_record
from threads.services.integrity import (
    chain_hash_at,
    chain_walk,
    checkpoint_checksum,
    checkpoint_is_safe,
    summary_checksum,
)
from threads.services.threads import thread_lock

__all__ = [
    "checkpoint_checksum",
    "checkpoint_as_audit",
    "checkpoint_build",
    "checkpoint_create",
    "checkpoint_record",
    "checkpoint_require_safe",
    "pending_at",
    "restored_version_save",
    "summary_versions_replaced",
]


class CheckpointUnsafe(Conflict):
    code = "checkpoint_unsafe"


def _hash_at(thread: Thread, seq: int) -> str:
    found = chain_hash_at(thread, seq)
    if found is None:
        raise NotFound(f"event {seq} not found")
    return found


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
        .select_related("summary_version", "thread")
        .order_by("-cursor", "-pk")
        .first()
    )
    if checkpoint is None or checkpoint.checksum != checkpoint_checksum(checkpoint):
        return 0, []
    return checkpoint.cursor, list(checkpoint.pending)


def _pending_rows(thread: Thread, start: int, cursor: int) -> Any:
    """(id, seq, kind, side_effect, call_seq, status, approval_seq) of the events after
    `start` up to `cursor` of the kinds that open or close work, in order."""
    return (
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


@functools.cache
def _pending_sql(alias: str) -> str:
    """The statement of _pending_read_postgres, quoted for `alias` once per process: the
    nearest safe checkpoint at or before the cursor (part 0: what its checksum covers) and the
    events after it of the kinds that open or close work (part 1), in one result."""
    quote = connections[alias].ops.quote_name
    checkpoints = quote(Checkpoint._meta.db_table)
    versions = quote(SummaryVersion._meta.db_table)
    events = quote(Event._meta.db_table)
    # The JSON keys as JSON text, decoded as the ORM's key transforms decode them.
    return (
        "WITH s AS (SELECT c.cursor, c.chain_hash, c.summary_checksum, c.pending, c.checksum, "
        f"c.summary_version_id FROM {checkpoints} c WHERE c.thread_id = %s AND c.cursor <= %s "
        "AND c.safe ORDER BY c.cursor DESC, c.id DESC LIMIT 1) "
        "SELECT 0, s.cursor, (SELECT v.version FROM "
        f"{versions} v WHERE v.id = s.summary_version_id)::bigint, s.chain_hash::text, "
        "s.summary_checksum::text, s.pending::text, s.checksum::text, NULL::text FROM s "
        "UNION ALL (SELECT 1, e.id, e.seq, e.kind::text, (e.data->'side_effect')::text, "
        "(e.data->'call_seq')::text, (e.data->'status')::text, (e.data->'approval_seq')::text "
        f"FROM {events} e WHERE e.thread_id = %s AND e.seq > COALESCE((SELECT s.cursor FROM s), "
        "0) AND e.seq <= %s AND e.kind = ANY(%s::text[]) ORDER BY e.seq)"
    )


def _json_or_none(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _pending_read_postgres(
    connection: Any, thread: Thread, cursor: int
) -> tuple[int, list[dict[str, Any]], list[tuple[Any, ...]]]:
    """_pending_start and the replay's rows in one prepared statement: the nearest safe
    checkpoint at or before `cursor`, and the events after it. Compiling the ORM's two
    querysets (a join for the checksum's fields, four JSON key transforms) cost more than the
    database's work for a graph checkpointer's put, which makes a checkpoint on every step. When the
    checksum does not recompute, the replay starts from the first event, as _pending_start
    decides."""
    sql = _pending_sql(connection.alias)
    kinds = [str(kind) for kind in PENDING_EVENT_KINDS]
    found = rows_read(connection, sql, (thread.pk, cursor, thread.pk, cursor, kinds))
    starts = [row for row in found if row[0] == 0]
    rows = [
        (i, seq, kind, *(_json_or_none(text) for text in keys))
        for part, i, seq, kind, *keys in found
        if part == 1
    ]
    rows.sort(key=lambda row: row[1])  # by seq, whatever order the union came back in
    if not starts:
        return 0, [], rows
    _, at, version, chain_hash, summary_checksum_, pending_text, checksum, _ = starts[0]
    pending = json.loads(pending_text)
    body = checkpoint_fields_body(
        thread_id=thread.pk,
        summary_version=version,
        cursor=at,
        chain_hash=chain_hash,
        summary_checksum=summary_checksum_,
        pending=pending,
    )
    if checksum != chain.checksum(body, thread_key(thread)):
        return 0, [], list(_pending_rows(thread, 0, cursor))
    return at, list(pending), rows


def pending_at(
    *, thread: Thread, cursor: int, from_checkpoint: bool = True
) -> list[dict[str, Any]]:
    """Side effects and approvals still open at `cursor`, as the log stood then.

    A side effect is open while its call has no result (running) or only a timeout (unknown)
    and no resolution; an approval while its request has no decision. Starts from the nearest
    trusted checkpoint and replays only the events after it (a few key columns of the kinds
    that matter), so a commit costs the same at seq 1,000 and at seq 100,000.
    """
    connection = connections[router.db_for_read(Event)]
    rows: Any
    if from_checkpoint and connection.vendor == "postgresql":
        start, inherited, rows = _pending_read_postgres(connection, thread, cursor)
    else:
        start, inherited = _pending_start(thread, cursor) if from_checkpoint else (0, [])
        rows = _pending_rows(thread, start, cursor)
    work = OpenWork(
        effects={p["call_seq"]: dict(p) for p in inherited if p["kind"] == "side_effect"},
        approvals={p["request_seq"]: dict(p) for p in inherited if p["kind"] == "approval"},
    )
    new_calls: dict[int, int] = {}  # event id -> call seq
    new_requests: dict[int, int] = {}  # event id -> request seq
    for event_id, seq, kind, side_effect, call_seq, status, approval_seq in rows:
        if kind == EventKind.TOOL_CALL and side_effect:
            work.call(seq)
            new_calls[event_id] = seq
        elif kind in (EventKind.TOOL_RESULT, EventKind.SIDE_EFFECT_RESOLUTION):
            work.answer(kind, call_seq, status)
        elif kind == EventKind.APPROVAL_REQUEST:
            work.request(seq)
            new_requests[event_id] = seq
        elif kind == EventKind.APPROVAL_DECISION:
            work.decide(approval_seq)
    # A queryset is built (and compiled) only when there are rows to read: most checkpoints
    # open no new work, and building two empty ones cost more than the rest of this function.
    wanted = [i for i, s in new_calls.items() if s in work.effects]
    if wanted:
        for effect in SideEffect.objects.filter(call_event_id__in=wanted).values(
            "id", "tool_call_id", "tool_name", "idempotency_key", "call_seq"
        ):
            work.effects[effect["call_seq"]].update(effect)
    wanted = [i for i, s in new_requests.items() if s in work.approvals]
    if wanted:
        for approval in ApprovalRequest.objects.filter(request_event_id__in=wanted).values(
            "id", "action", "request_event__seq"
        ):
            work.approvals[approval["request_event__seq"]].update(
                id=approval["id"], action=approval["action"]
            )
    return work.entries()


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
    checkpoint = checkpoint_build(
        thread=thread,
        version=version,
        cursor=cursor,
        chain_hash=chain_hash,
        summary_checksum=summary_checksum,
        label=label,
        created_by=created_by,
    )
    checkpoint.save(force_insert=True)
    return checkpoint


def checkpoint_build(
    *,
    thread: Thread,
    version: SummaryVersion | None,
    cursor: int,
    chain_hash: str,
    summary_checksum: str,
    label: str = "",
    created_by: Any = None,
) -> Checkpoint:
    """checkpoint_record's checkpoint, checksummed but not saved yet: for a caller that inserts
    it along with a row of its own (an integration's state checkpoint), in the same transaction."""
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
    return checkpoint


def checkpoint_create(*, thread: Thread, label: str, actor: Any) -> Checkpoint:
    """An on-demand checkpoint at the current head: the head version (or none) and its
    covered_until as the cursor. Operator or higher.

    Locks the thread row (select_for_update) so head version, cursor and chain hash are read
    as one consistent state.
    """
    require_role(actor, thread.workspace, Role.OPERATOR)
    with transaction.atomic(durable=True):
        locked = thread_lock(thread)
        head = (
            SummaryVersion.objects.get(thread=locked, version=locked.head_version)
            if locked.head_version
            else None
        )
        cursor = locked.covered_until
        checkpoint = checkpoint_record(
            thread=locked,
            version=head,
            cursor=cursor,
            chain_hash=_hash_at(locked, cursor),
            summary_checksum=head.checksum if head is not None else "",
            label=label.strip(),
            created_by=actor,
        )
        audit_record(
            workspace=locked.workspace,
            actor=actor,
            action="checkpoint.create",
            target_type="checkpoint",
            target_id=checkpoint.pk,
            thread=locked,
            after=checkpoint_as_audit(checkpoint),
        )
    return checkpoint


def _require_own(thread: Thread, checkpoint: Checkpoint) -> None:
    if checkpoint.thread_id != thread.pk:
        raise NotFound("checkpoint not found")


def checkpoint_require_safe(checkpoint: Checkpoint, doing: str) -> None:
    """Re-check the checkpoint now. checkpoint_is_safe may trust the last integrity sweep for
    the chain; a restore walks the chain from genesis to the cursor itself, so a row altered
    since the last sweep is caught too."""
    safe, reason = checkpoint_is_safe(checkpoint)
    if safe:
        verdict = chain_walk(
            thread_id=checkpoint.thread_id,
            start_seq=0,
            start_hash=thread_genesis(checkpoint.thread_id, checkpoint.thread.chain_key_id),
            until=checkpoint.cursor,
            key=thread_key(checkpoint.thread),
        )
        if not verdict.ok:
            safe = False
            reason = f"the chain breaks at seq {verdict.first_bad_seq}: {verdict.detail}"
        elif verdict.head != checkpoint.chain_hash:
            safe = False
            reason = f"the chain hash at seq {checkpoint.cursor} differs from the checkpoint's"
    if not safe:
        raise CheckpointUnsafe(
            f"cannot {doing} checkpoint {checkpoint.pk}: {reason}",
            fields={"checkpoint": reason},
        )


def _restored_verification(source: SummaryVersion, checkpoint: Checkpoint, detail: str) -> dict:
    """The source's verification report plus the check that made the restore legitimate."""
    report = dict(source.verification or {})
    checks = list(report.get("checks", []))
    checks.append({"name": "checkpoint_safe", "ok": True, "detail": detail})
    return {"ok": bool(report.get("ok")), "checks": checks}


def restored_version_save(
    *,
    thread: Thread,
    number: int,
    base_version: int,
    checkpoint: Checkpoint,
    chain_hash: str,
    trigger: dict[str, Any],
    detail: str,
    now: Any,
    source: SummaryVersion | None = None,
    covered_until: int | None = None,
) -> SummaryVersion:
    """Save a committed version whose content is the checkpoint's summary, covering up to the
    checkpoint's cursor (a rollback's new head, a fork's first version). A checkpoint that
    holds no summary (an integration's state checkpoint) names the `source` and the
    `covered_until` instead."""
    source = source or checkpoint.summary_version
    assert source is not None
    version = SummaryVersion(
        thread=thread,
        version=number,
        base_version=base_version,
        phase=SummaryPhase.COMMITTED,
        covered_from=source.covered_from,
        covered_until=checkpoint.cursor if covered_until is None else covered_until,
        chain_hash=chain_hash,
        trigger=trigger,
        backend=source.backend,
        content=source.content,
        rendered=source.rendered,
        tokens=source.tokens,
        tokens_replaced=source.tokens_replaced,
        verification=_restored_verification(source, checkpoint, detail),
        restored_from=checkpoint,
        decided_at=now,
    )
    version.checksum = summary_checksum(version)
    version.save()
    return version
