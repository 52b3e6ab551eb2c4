"""Checkpoints, rollback and fork (DESIGN §6).

A checkpoint stores references and hashes, never copies: the summary version it stands on, the
cursor (events 1..cursor), the chain hash at the cursor, the summary's checksum and the work
that was pending at the cursor, plus a checksum over all of these. Rollback and fork trust a
checkpoint only after re-checking it (threads.services.integrity.checkpoint_is_safe), never on
its stored `safe` flag alone.

Rollback never rewinds anything: it writes a new head version (versions only increase) whose
content is the checkpoint's summary, and the events after the cursor become delta again, so the
agent still sees every side effect that happened after the checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone

from threads.access import require_role
from threads.domain import chain
from threads.domain.errors import Conflict, InvalidEvent, NotFound
from threads.domain.events import NewEvent
from threads.models import (
    ApprovalRequest,
    ApprovalStatus,
    Checkpoint,
    Event,
    EventKind,
    Role,
    SideEffect,
    SummaryPhase,
    SummaryVersion,
    Thread,
)
from threads.services.audit import audit_record
from threads.services.chainkey import chain_key
from threads.services.event_rows import RESULT_TO_SIDE_EFFECT
from threads.services.events import event_append_batch

# One checkpoint writer for the code base: the fold's commit, rollback, fork and on-demand
# checkpoints all go through folding.checkpoint_record, whose checksum is
# integrity.checkpoint_checksum (the function the integrity sweep recomputes).
from threads.services.folding import checkpoint_record
from threads.services.integrity import (
    chain_walk,
    checkpoint_checksum,
    checkpoint_is_safe,
    summary_checksum,
)

__all__ = [
    "checkpoint_checksum",
    "checkpoint_create",
    "checkpoint_rollback",
    "thread_fork",
]

FORK_CHUNK = 1000  # events copied per append batch (the API's batch limit)
MAX_EXTERNAL_ID = 200
MAX_REASON = 2000


class CheckpointUnsafe(Conflict):
    code = "checkpoint_unsafe"


class CheckpointHasNoSummary(Conflict):
    code = "checkpoint_has_no_summary"


class ExternalIdTaken(Conflict):
    code = "external_id_taken"


class HeadMoved(Conflict):
    code = "head_moved"


def _hash_at(thread: Thread, seq: int) -> str:
    if seq == 0:
        return chain.genesis_hash(str(thread.id), chain_key())
    found = Event.objects.filter(thread=thread, seq=seq).values_list("hash", flat=True).first()
    if found is None:
        raise NotFound(f"event {seq} not found")
    return found


def checkpoint_as_audit(checkpoint: Checkpoint) -> dict[str, Any]:
    version = checkpoint.summary_version
    return {
        "id": checkpoint.pk,
        "summary_version": version.version if version is not None else None,
        "cursor": checkpoint.cursor,
        "chain_hash": checkpoint.chain_hash,
        "label": checkpoint.label,
    }


def checkpoint_create(*, thread: Thread, label: str, actor: Any) -> Checkpoint:
    """An on-demand checkpoint at the current head: the head version (or none) and its
    covered_until as the cursor. Operator or higher.

    Locks the thread row (select_for_update) so head version, cursor and chain hash are read
    as one consistent state.
    """
    require_role(actor, thread.workspace, Role.OPERATOR)
    with transaction.atomic(durable=True):
        # of=self: lock the thread row only, never the joined workspace row.
        locked = (
            Thread.objects.select_for_update(of=("self",))
            .select_related("workspace")
            .get(pk=thread.pk)
        )
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


def _versions_replaced(thread: Thread, checkpoint: Checkpoint) -> list[SummaryVersion]:
    """Committed versions newer than the checkpoint's summary: what a rollback supersedes."""
    versions = SummaryVersion.objects.filter(thread=thread, phase=SummaryPhase.COMMITTED)
    if checkpoint.summary_version is not None:
        versions = versions.filter(version__gt=checkpoint.summary_version.version)
    return list(versions.defer("content", "rendered").order_by("version"))


def _require_safe(checkpoint: Checkpoint, doing: str) -> None:
    """Re-check the checkpoint now. checkpoint_is_safe may trust the last integrity sweep for
    the chain; a restore walks the chain from genesis to the cursor itself, so a row altered
    since the last sweep is caught too."""
    safe, reason = checkpoint_is_safe(checkpoint)
    if safe:
        verdict = chain_walk(
            thread_id=checkpoint.thread_id,
            start_seq=0,
            start_hash=chain.genesis_hash(str(checkpoint.thread_id), chain_key()),
            until=checkpoint.cursor,
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


def _clean_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise InvalidEvent("a reason is required", fields={"reason": "this field is required"})
    if len(reason) > MAX_REASON:
        raise InvalidEvent(
            "reason is too long", fields={"reason": f"must be at most {MAX_REASON} characters"}
        )
    return reason


def _restored_verification(source: SummaryVersion, checkpoint: Checkpoint, detail: str) -> dict:
    """The source's verification report plus the check that made the restore legitimate."""
    report = dict(source.verification or {})
    checks = list(report.get("checks", []))
    checks.append({"name": "checkpoint_safe", "ok": True, "detail": detail})
    return {"ok": bool(report.get("ok")), "checks": checks}


def checkpoint_rollback(
    *, thread: Thread, checkpoint: Checkpoint, actor: Any, reason: str
) -> SummaryVersion:
    """Make the checkpoint's summary the head again, as a new version. Admin only.

    Locks the thread row (select_for_update), re-checks that the checkpoint is safe (checksum,
    chain up to the cursor, verified summary), writes version last_version+1 with the
    checkpoint's content and covered_until = cursor, compare-and-swaps the head, marks the
    versions it supersedes rolled_back, checkpoints the new head and audits it, all in one
    transaction. Events are untouched.
    """
    require_role(actor, thread.workspace, Role.ADMIN)
    reason = _clean_reason(reason)
    _require_own(thread, checkpoint)
    with transaction.atomic(durable=True):
        # of=self: lock the thread row only, never the joined workspace row.
        locked = (
            Thread.objects.select_for_update(of=("self",))
            .select_related("workspace")
            .get(pk=thread.pk)
        )
        checkpoint = Checkpoint.objects.select_related("summary_version", "thread").get(
            pk=checkpoint.pk
        )
        _require_safe(checkpoint, "roll back to")
        source = checkpoint.summary_version
        if source is None:
            raise CheckpointHasNoSummary(
                f"checkpoint {checkpoint.pk} holds no summary: fork from it instead, or roll "
                "back to a checkpoint with a summary",
                fields={"checkpoint": "holds no summary version"},
            )
        replaced = _versions_replaced(locked, checkpoint)
        before = {"head_version": locked.head_version, "covered_until": locked.covered_until}
        now = timezone.now()
        version = _restored_version(
            thread=locked,
            number=locked.last_version + 1,
            base_version=locked.head_version,
            checkpoint=checkpoint,
            chain_hash=checkpoint.chain_hash,
            trigger={
                "kind": "rollback",
                "reason": reason,
                "checkpoint": checkpoint.pk,
                "restores_version": source.version,
            },
            detail=f"checkpoint {checkpoint.pk} re-checked at rollback: checksum, chain up to "
            f"seq {checkpoint.cursor} and summary v{source.version}",
            now=now,
        )
        # The head moves by compare-and-swap even under the lock, so the invariant "the head
        # only changes from the value it was read as" holds on every backend.
        swapped = Thread.objects.filter(pk=locked.pk, head_version=locked.head_version).update(
            head_version=version.version,
            last_version=version.version,
            covered_until=checkpoint.cursor,
            updated_at=now,
        )
        if swapped != 1:
            raise HeadMoved("the thread's head changed during the rollback; try again")
        SummaryVersion.objects.filter(pk__in=[v.pk for v in replaced]).update(
            phase=SummaryPhase.ROLLED_BACK
        )
        locked.head_version = locked.last_version = version.version
        locked.covered_until = checkpoint.cursor
        checkpoint_record(
            thread=locked,
            version=version,
            cursor=checkpoint.cursor,
            chain_hash=checkpoint.chain_hash,
            summary_checksum=version.checksum,
            label=f"rollback to checkpoint {checkpoint.pk}",
            created_by=actor,
        )
        audit_record(
            workspace=locked.workspace,
            actor=actor,
            action="thread.rollback",
            target_type="thread",
            target_id=locked.pk,
            thread=locked,
            before=before,
            after={
                "head_version": version.version,
                "covered_until": checkpoint.cursor,
                "checkpoint": checkpoint.pk,
                "restores_version": source.version,
                "versions_rolled_back": [v.version for v in replaced],
                "reason": reason,
            },
        )
    thread.head_version = thread.last_version = version.version
    thread.covered_until = checkpoint.cursor
    return version


def _copy_events(source: Iterable[Event]) -> list[NewEvent]:
    return [
        NewEvent(
            kind=event.kind,
            data=event.data,
            metadata=event.metadata,
            client_event_id=event.client_event_id,
            created_at=event.created_at,
            digest=event.request_digest,
        )
        for event in source
    ]


def _replay_outcomes(fork: Thread, parent: Thread, cursor: int) -> None:
    """Give the fork's side-effect and approval rows the status the log gives them at the
    cursor: resolutions and decisions are server events that the append path records as
    events only."""
    final: dict[int, str] = {}
    rows = (
        Event.objects.filter(
            thread=fork,
            kind__in=(EventKind.TOOL_RESULT, EventKind.SIDE_EFFECT_RESOLUTION),
        )
        .order_by("seq")
        .values_list("kind", "data")
    )
    resolved: set[int] = set()
    for kind, data in rows:
        status = data["status"]
        final[data["call_seq"]] = str(RESULT_TO_SIDE_EFFECT.get(status, status))
        if kind == EventKind.SIDE_EFFECT_RESOLUTION:
            resolved.add(data["call_seq"])
    for effect in SideEffect.objects.filter(thread=fork, call_seq__in=resolved):
        effect.status = final[effect.call_seq]
        effect.save(update_fields=["status", "updated_at"])
    decisions = Event.objects.filter(thread=fork, kind=EventKind.APPROVAL_DECISION).order_by("seq")
    if not decisions.exists():
        return
    deciders = dict(
        ApprovalRequest.objects.filter(thread=parent, request_event__seq__lte=cursor).values_list(
            "request_event__seq", "decided_by_id"
        )
    )
    for decision in decisions:
        seq = decision.data["approval_seq"]
        ApprovalRequest.objects.filter(thread=fork, request_event__seq=seq).update(
            status=ApprovalStatus.APPROVED
            if decision.data["decision"] == "approve"
            else ApprovalStatus.REJECTED,
            decision_event=decision,
            decided_at=decision.created_at,
            decided_by_id=deciders.get(seq),
            reason=decision.data.get("reason", ""),
        )


def thread_fork(*, thread: Thread, checkpoint: Checkpoint, external_id: str, actor: Any) -> Thread:
    """A new thread in the same workspace standing on `checkpoint`. Reviewer or higher.

    Copies events 1..cursor (same seq, kind, time, ids, metadata and data) re-chained under the
    new thread's own genesis, so the fork's chain verifies on its own; gives it a committed
    version 1 with the checkpoint's summary and a checkpoint of its own. Reads the parent and
    never writes to it: its events are immutable, so no lock on the parent is needed. The fork
    is locked (select_for_update, inside event_append_batch) while its log is numbered.
    """
    require_role(actor, thread.workspace, Role.REVIEWER)
    _require_own(thread, checkpoint)
    external_id = (external_id or "").strip()
    if not external_id or len(external_id) > MAX_EXTERNAL_ID:
        raise InvalidEvent(
            "external_id is required",
            fields={"external_id": f"must be a non-empty string of at most {MAX_EXTERNAL_ID}"},
        )
    checkpoint = Checkpoint.objects.select_related("summary_version", "thread").get(
        pk=checkpoint.pk
    )
    _require_safe(checkpoint, "fork from")
    if Thread.objects.filter(workspace_id=thread.workspace_id, external_id=external_id).exists():
        raise ExternalIdTaken(
            f"a thread with external_id {external_id!r} already exists in this workspace",
            fields={"external_id": "already taken"},
        )
    cursor = checkpoint.cursor
    with transaction.atomic(durable=True):
        fork = Thread(
            workspace_id=thread.workspace_id,
            external_id=external_id,
            title=thread.title,
            context_window=thread.context_window,
            reserved_output=thread.reserved_output,
            reasoning_reserve=thread.reasoning_reserve,
            safety_margin=thread.safety_margin,
            fixed_tokens=thread.fixed_tokens,
            encoding=thread.encoding,
            high_watermark=thread.high_watermark,
            low_watermark=thread.low_watermark,
            summarizer=thread.summarizer,
            parent_thread=thread,
            parent_checkpoint=checkpoint,
        )
        fork.chain_head = chain.genesis_hash(str(fork.id), chain_key())
        fork.save(force_insert=True)
        source = Event.objects.filter(thread=thread, seq__lte=cursor).order_by("seq")
        for start in range(0, cursor, FORK_CHUNK):
            chunk = list(source.filter(seq__gt=start, seq__lte=start + FORK_CHUNK))
            event_append_batch(thread=fork, new_events=_copy_events(chunk), lock=False)
        _replay_outcomes(fork, thread, cursor)
        fork_version = None
        if checkpoint.summary_version is not None:
            fork_version = _fork_version(fork, checkpoint)
            Thread.objects.filter(pk=fork.pk, head_version=0).update(
                head_version=1, last_version=1, covered_until=cursor
            )
            fork.head_version = fork.last_version = 1
            fork.covered_until = cursor
        checkpoint_record(
            thread=fork,
            version=fork_version,
            cursor=cursor,
            chain_hash=fork.chain_head,
            summary_checksum=fork_version.checksum if fork_version is not None else "",
            label=f"fork of {thread.external_id} at checkpoint {checkpoint.pk}",
            created_by=actor,
        )
        audit_record(
            workspace=thread.workspace,
            actor=actor,
            action="thread.fork",
            target_type="thread",
            target_id=fork.pk,
            thread=fork,
            after={
                "external_id": external_id,
                "parent_thread": str(thread.pk),
                "parent_external_id": thread.external_id,
                "checkpoint": checkpoint.pk,
                "cursor": cursor,
                "summary_version": fork_version.version if fork_version else None,
            },
        )
    return Thread.objects.select_related("workspace").get(pk=fork.pk)


def _fork_version(fork: Thread, checkpoint: Checkpoint) -> SummaryVersion:
    source = checkpoint.summary_version
    assert source is not None
    return _restored_version(
        thread=fork,
        number=1,
        base_version=0,
        checkpoint=checkpoint,
        chain_hash=fork.chain_head,
        trigger={
            "kind": "fork",
            "reason": f"forked from thread {checkpoint.thread.external_id} "
            f"at checkpoint {checkpoint.pk}",
            "parent_thread": str(checkpoint.thread_id),
            "checkpoint": checkpoint.pk,
            "restores_version": source.version,
        },
        detail=f"parent checkpoint {checkpoint.pk} re-checked at fork; events "
        f"1..{checkpoint.cursor} re-chained under this thread's genesis",
        now=timezone.now(),
    )


def _restored_version(
    *,
    thread: Thread,
    number: int,
    base_version: int,
    checkpoint: Checkpoint,
    chain_hash: str,
    trigger: dict[str, Any],
    detail: str,
    now: Any,
) -> SummaryVersion:
    """Save a committed version whose content is the checkpoint's summary, covering up to the
    checkpoint's cursor (a rollback's new head, a fork's first version)."""
    source = checkpoint.summary_version
    assert source is not None
    version = SummaryVersion(
        thread=thread,
        version=number,
        base_version=base_version,
        phase=SummaryPhase.COMMITTED,
        covered_from=source.covered_from,
        covered_until=checkpoint.cursor,
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
